-- Runtime claims, one run each, no long-poll. Counts answers that claimed nothing: each
-- claim must find work, so the summary line must say `empty=0`.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.body = '{"worker_id":"bench-scale","max":1,"wait_seconds":0}'
  wrk.headers["content-type"] = "application/json"
  empty = 0
  claimed = 0
end

function response(status, headers, body)
  if status == 200 and body:find('"claims":%[%]') then
    empty = empty + 1
  elseif status == 200 then
    claimed = claimed + 1
  end
end

function done(summary, latency, requests)
  local e, c = 0, 0
  for _, t in ipairs(threads) do
    e = e + t:get("empty")
    c = c + t:get("claimed")
  end
  io.write(string.format("claims: claimed=%d empty=%d\n", c, e))
end
