-- Creates a session per request.
wrk.method = "POST"
wrk.body = '{"title":"bench","metadata":{"k":"v"}}'
wrk.headers["content-type"] = "application/json"
