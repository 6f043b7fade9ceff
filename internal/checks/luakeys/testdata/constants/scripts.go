package sample

const head = "local x = 1\n"

// joined is a script built from two constants.
const joined = head + `redis.call('GET', KEYS[1])`

const notScript = "hello"

// A literal outside any constant.
var del = newScript(
	"redis.call('DEL', KEYS[1])")
