-- Each wrk thread suspends its own slice of the claimed runs listed in args[1]
-- ("path<TAB>fencing token"), once each, with a checkpoint and a pending approval.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  runs = {}
  local i = 0
  for line in io.lines(args[1]) do
    if i % tonumber(args[2]) == id then
      local path, token = line:match("([^\t]+)\t(%d+)")
      table.insert(runs, { path = path, token = token })
    end
    i = i + 1
  end
  counter = 0
  wrk.method = "POST"
  wrk.headers["content-type"] = "application/json"
end

function request()
  counter = counter + 1
  if #runs == 0 then
    wrk.thread:stop()
    return wrk.format("GET", "/readyz")
  end
  if counter > #runs then
    -- Out of claimed runs: further requests would be refused, so stop.
    wrk.thread:stop()
  end
  local r = runs[math.min(counter, #runs)]
  local body = '{"fencing_token":' .. r.token .. ',"reason":"approval_required",' ..
    '"checkpoint":{"codec_version":"v1","sequence":1,"state":{"step":3},' ..
    '"resolved_spec_hash":"sha256:' .. string.rep("ab", 32) .. '"},' ..
    '"interaction":{"interaction_type":"approval","allowed_decisions":["approve","deny"],' ..
    '"payload":{"command":"rm -rf build/"}}}'
  return wrk.format(nil, r.path, nil, body)
end
