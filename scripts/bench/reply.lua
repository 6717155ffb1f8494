-- Each wrk thread answers its own slice of the seeded pending interactions, once each.
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  paths = {}
  local i = 0
  for line in io.lines(args[1]) do
    if i % tonumber(args[2]) == id then
      table.insert(paths, line)
    end
    i = i + 1
  end
  wrk.method = "POST"
  wrk.body = '{"decision":"approve"}'
  wrk.headers["content-type"] = "application/json"
end

function request()
  counter = counter + 1
  if counter > #paths then
    -- Out of fresh interactions: further requests would be cheap replays, so stop.
    wrk.thread:stop()
  end
  return wrk.format(nil, paths[math.min(counter, #paths)])
end

function done(summary, latency, requests)
end
