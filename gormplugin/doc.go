// Package gormplugin makes GORM fill snowflake primary keys before rows
// reach the database:
//
//	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
//	...
//	err = db.Use(gormplugin.New(gen, gormplugin.Options{}))
//
//	type Post struct {
//		ID       idtype.ID // primary key: filled on create
//		AuthorID idtype.ID
//		Title    string
//	}
//	db.Create(&post) // post.ID is set, and is the row's key
//
// # Options
//
// Like every snowkey constructor, New takes its configuration as one
// Options struct by value, go-redis style, whose zero value is the
// default; since the common call needs none, it is an optional trailing
// argument: New(gen) or New(gen, Options{OnlyTagged: true}). Bad
// arguments (a nil Source, two Options) make db.Use fail with an error
// wrapping idtype.ErrInvalidOptions, the one sentinel for bad options
// across snowkey.
//
// # Which fields
//
// The plugin reads GORM's own schema of the model, never column names:
//
//   - the primary key, when it is the model's only primary key and its
//     type is idtype.ID (or *idtype.ID);
//   - every field tagged `gorm:"snowflake"`, whether or not it is a key,
//     of type int64, idtype.ID or another type defined as int64 (type Seq
//     int64), or a pointer to one of these. No other type: not int, not
//     uint64, though they may be 64 bits wide, because a snowflake is a
//     positive int64 and PostgreSQL's bigint is signed.
//
// It never fills a field whose value is already set, a field the database
// fills (a `default:` tag such as `default:snowflake_id()`, an explicit
// `autoIncrement`, a `generated:` column), a field GORM does not insert
// (`<-:false`, or left out with Omit or Select), or the halves of a
// composite primary key that are not tagged (a many2many join table's key
// is left alone). `snowflake:false` opts a key out; Options.OnlyTagged
// makes the plugin fill tagged fields only. A field tagged snowflake of
// any other type (a uint64, say) fails every create of its model with
// ErrFieldType, naming the field, its type and the types that work.
//
// Because idtype.ID's GormDataType is "bigint", AutoMigrate makes its keys
// plain bigint columns, not bigserial. An int64 key tagged snowflake needs
// `autoIncrement:false` as well, or GORM makes it a bigserial.
//
// # Where
//
// Everything GORM creates goes through the plugin's callback, which runs
// before GORM's "gorm:before_create", so the model's BeforeSave and
// BeforeCreate hooks already see their keys: Create of a struct, a
// pointer, a slice, a slice of pointers (nil elements are left to GORM,
// which refuses them), an array; CreateInBatches; Create from a map or a
// slice of maps through db.Model (keys by field or column name);
// associations saved with their owner (belongs-to, has-one, has-many,
// many2many); Save of a value with a zero key; FirstOrCreate; sessions
// with SkipHooks, since the callback is not a hook. A statement takes all
// its IDs, keys and tagged fields of every row, with one Source.NextN
// call, in row order, so a batch's keys increase along the slice.
//
// In a map, a key counts as unassigned in every spelling of zero: nil, a
// nil pointer or a pointer to 0 (filled through the pointer), 0 of any
// integer or float type, "", "0", json.Number("0"), and a driver.Valuer of
// one of these (sqltype.NullID{}, sql.NullInt64{}). A key spelled as text
// ("123", json.Number) is read strictly, as idtype.Parse reads it, and the
// map then holds it as the field's type. A value that is no ID (junk text,
// a sign, spaces, a negative number, a non-zero float such as a number
// decoded from JSON into a map[string]any, a bool) fails the create with
// ErrKeyValue, before anything is written: PostgreSQL would cast " 12" or
// 1.5 into a key. An SQL expression (gorm.Expr) is left to the database.
//
// # When the Source fails
//
// A Source error fails the statement that needed the IDs before that
// statement writes anything, with an error wrapping ErrGenerate and the
// Source's own error, and the rows of that statement keep their zero keys
// (IDs are set only after NextN succeeded for all of them).
//
// One call to GORM may run several statements: CreateInBatches runs one
// per batch, and a create with associations one per association. When the
// Source fails in a later statement, what the earlier ones wrote is
// GORM's business:
//
//   - In a transaction (GORM's default: CreateInBatches of more than one
//     batch, and a create with associations, run in one), every row is
//     rolled back. The structs of the earlier statements keep the keys the
//     plugin gave them, which no row has; the failing statement's and the
//     later ones' keys are zero. Creating the same slice again inserts
//     every row, the earlier ones with the keys they hold.
//   - With SkipDefaultTransaction, the earlier batches are committed, and
//     their structs hold their rows' keys; the failing batch and the later
//     ones have zero keys and no rows. Create the rest again, from the
//     first struct with a zero key; creating the whole slice again fails on
//     the rows that exist.
//
// # Upserts
//
// An upsert never changes an existing row's snowflake fields. With ON
// CONFLICT ... DO UPDATE, a row that already existed keeps its key; the
// struct is given a new one before the insert. OnConflict{UpdateAll: true}
// (which Save of a slice uses) sets every inserted column from the
// proposed row except those GORM keeps (the primary key, columns with a
// database default, autoCreateTime); the plugin keeps the fields it fills
// out of that list too, so a row keeps a tagged public ID as it keeps its
// key. A column named in DoUpdates is updated as written. Save of a struct
// with a key updates every column: a snowflake field that is zero in the
// struct is left out of that UPDATE, as it would be filled on create, and
// one that holds a value is written.
//
// The struct then holds the row's real values: when the conflict target
// does not include a field the plugin fills, the plugin adds it to the
// statement's RETURNING clause (the UPDATE's, for Save), and GORM scans the
// row's value back into the struct. With ON CONFLICT DO NOTHING there is no row to read a
// conflicting key from: a struct whose row was not inserted keeps the key
// the plugin gave it, which no row has, and the statement's RowsAffected
// says how many rows were inserted. Query by the conflict columns to learn
// the real keys. Upserts from maps are not read back either.
package gormplugin
