package sample

// The control of TestRepositoryScripts: scripts shaped as a token store's,
// each of which touches a key it builds itself.

const luaEntry = "local sid = ARGV[2]\n"

// validate builds the session key from a prefix it was given in ARGV.
const validate = luaEntry + `if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('GET', ARGV[1] .. sid)`

// revokeAll deletes keys named by a set's members.
var revokeAll = newScript(`for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('DEL', k)
end`)
