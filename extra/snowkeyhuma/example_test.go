package snowkeyhuma_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/snowkeyhq/snowkey/extra/snowkeyhuma"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/sqltype"
)

func ExampleRegister() {
	api := humago.New(http.NewServeMux(), huma.DefaultConfig("posts", "1.0.0"))
	snowkeyhuma.Register(api.OpenAPI().Components.Schemas)

	type Reply struct {
		ID       idtype.ID      `json:"id"`
		ParentID sqltype.NullID `json:"parent_id"`
	}
	s := api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Reply](), false, "")
	for _, field := range []string{"id", "parent_id"} {
		b, _ := json.Marshal(s.Properties[field])
		fmt.Printf("%s: %s\n", field, b)
	}
	// Output:
	// id: {"description":"A 64-bit snowflake ID as decimal digits, at most 9223372036854775807.","examples":["1541815603606036480"],"pattern":"^(0|[1-9][0-9]{0,18})$","type":"string"}
	// parent_id: {"description":"A 64-bit snowflake ID as decimal digits, at most 9223372036854775807.","examples":["1541815603606036480"],"pattern":"^(0|[1-9][0-9]{0,18})$","type":["string","null"]}
}
