-- Each wrk thread reads the snapshot of its own slice of sessions, each once (args: the file
-- of snapshot paths, the number of threads), then stops: every request is a first read.
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
end

function request()
  counter = counter + 1
  if counter > #paths then
    wrk.thread:stop()
  end
  return wrk.format(nil, paths[math.min(counter, #paths)])
end
