-- Creates a run per request, in the sessions listed in args[1], one after the other.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  paths = {}
  for line in io.lines(args[1]) do
    table.insert(paths, "/v1/sessions/" .. line .. "/runs")
  end
  counter = id
  wrk.method = "POST"
  wrk.body = '{"resolved_spec_hash":"sha256:' .. string.rep("ab", 32) .. '","input":{"q":1}}'
  wrk.headers["content-type"] = "application/json"
end

function request()
  counter = counter + 1
  return wrk.format(nil, paths[counter % #paths + 1])
end
