-- Adds one entry to a stream once per delivery id (see addOnce in sink.go).
local seen = redis.call('GET', KEYS[1])
if seen then
  return {seen, 1}
end
local id
if tonumber(ARGV[2]) > 0 then
  id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
else
  id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))
end
redis.call('SET', KEYS[1], id, 'PX', ARGV[1])
return {id, 0}
