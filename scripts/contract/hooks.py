"""Schemathesis hooks for scripts/contract-test."""

import itertools

import schemathesis

_serial = itertools.count(1)


@schemathesis.hook
def before_call(context, case, kwargs):
    # Generated Idempotency-Key values repeat across unrelated bodies ("0", "A", ...), and a
    # key reused with another body is the documented 422 `idempotency.key_reused`, which
    # would read as a valid request rejected. Each call gets its own key (the generated
    # value with a unique suffix, still matching the header's pattern); the replay contract
    # itself is tested in tests/api.
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key" and isinstance(headers[name], str):
            value = headers[name]
            if value and all("!" <= c <= "~" for c in value):
                headers[name] = f"{value[:200]}-{next(_serial)}"
