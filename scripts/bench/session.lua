-- Creates a session per request.
function init(args)
  wrk.method = "POST"
  wrk.body = '{"title":"bench","metadata":{"k":"v"}}'
  wrk.headers["content-type"] = "application/json"
end
