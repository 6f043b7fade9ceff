package workerid

import (
	"reflect"
	"slices"
	"testing"
)

// TestDefenceNames: every field of defences is a switch with a name of its
// own, and a defences value survives the trip to a helper process by
// name (names, then defencesNamed); an unknown name is refused.
func TestDefenceNames(t *testing.T) {
	typ := reflect.TypeFor[defences]()
	var all []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Bool {
			t.Fatalf("defences.%s is a %v, not a switch", f.Name, f.Type)
		}
		name := defenceName(f.Name)
		if name == "" || slices.Contains(all, name) {
			t.Fatalf("defences.%s is named %q, which is empty or another's", f.Name, name)
		}
		all = append(all, name)
		one, err := defencesNamed([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		if got := one.names(); !slices.Equal(got, []string{name}) {
			t.Errorf("defencesNamed(%q).names() = %v", name, got)
		}
	}
	every, err := defencesNamed(all)
	if err != nil {
		t.Fatal(err)
	}
	if got := every.names(); !slices.Equal(got, all) {
		t.Errorf("every defence off: names %v, want %v", got, all)
	}
	if got := (defences{}).names(); len(got) != 0 {
		t.Errorf("no defence off: names %v", got)
	}
	if _, err := defencesNamed([]string{"no-such-defence"}); err == nil {
		t.Error("an unknown name was accepted")
	}
	t.Logf("%d defences: %v", len(all), all)
}
