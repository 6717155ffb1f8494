from http import HTTPStatus
from typing import Any, cast

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.inbox_page import InboxPage
from ...models.list_inbox_status import ListInboxStatus
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: ListInboxStatus | Unset = UNSET,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    wait_seconds: int | Unset = UNSET,
    if_none_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_none_match, Unset):
        headers["If-None-Match"] = if_none_match

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["cursor"] = cursor

    params["limit"] = limit

    params["wait_seconds"] = wait_seconds

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/interactions",
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | InboxPage | Problem | None:
    if response.status_code == 200:
        response_200 = InboxPage.from_dict(response.json())

        return response_200

    if response.status_code == 304:
        response_304 = cast(Any, None)
        return response_304

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | InboxPage | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: ListInboxStatus | Unset = UNSET,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    wait_seconds: int | Unset = UNSET,
    if_none_match: str | Unset = UNSET,
) -> Response[Any | InboxPage | Problem]:
    """
    Args:
        status (ListInboxStatus | Unset): Which interactions the inbox lists.
        cursor (str | Unset):
        limit (int | Unset):
        wait_seconds (int | Unset):
        if_none_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | InboxPage | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        cursor=cursor,
        limit=limit,
        wait_seconds=wait_seconds,
        if_none_match=if_none_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: ListInboxStatus | Unset = UNSET,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    wait_seconds: int | Unset = UNSET,
    if_none_match: str | Unset = UNSET,
) -> Any | InboxPage | Problem | None:
    """
    Args:
        status (ListInboxStatus | Unset): Which interactions the inbox lists.
        cursor (str | Unset):
        limit (int | Unset):
        wait_seconds (int | Unset):
        if_none_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | InboxPage | Problem
    """

    return sync_detailed(
        client=client,
        status=status,
        cursor=cursor,
        limit=limit,
        wait_seconds=wait_seconds,
        if_none_match=if_none_match,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: ListInboxStatus | Unset = UNSET,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    wait_seconds: int | Unset = UNSET,
    if_none_match: str | Unset = UNSET,
) -> Response[Any | InboxPage | Problem]:
    """
    Args:
        status (ListInboxStatus | Unset): Which interactions the inbox lists.
        cursor (str | Unset):
        limit (int | Unset):
        wait_seconds (int | Unset):
        if_none_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | InboxPage | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        cursor=cursor,
        limit=limit,
        wait_seconds=wait_seconds,
        if_none_match=if_none_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: ListInboxStatus | Unset = UNSET,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    wait_seconds: int | Unset = UNSET,
    if_none_match: str | Unset = UNSET,
) -> Any | InboxPage | Problem | None:
    """
    Args:
        status (ListInboxStatus | Unset): Which interactions the inbox lists.
        cursor (str | Unset):
        limit (int | Unset):
        wait_seconds (int | Unset):
        if_none_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | InboxPage | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            cursor=cursor,
            limit=limit,
            wait_seconds=wait_seconds,
            if_none_match=if_none_match,
        )
    ).parsed
