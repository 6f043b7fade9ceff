// Package private starts servers that belong to one test, which may
// break them, beside the shared ones of package testenv:
//
//   - StartRedis: a redis-server to kill, restart and reconfigure
//     (ConfigSet, for maxmemory and its policy);
//   - StartRedisReplica: a replica of a primary, possibly through a
//     faultproxy.Proxy so that replication can be frozen and the replica lag;
//     Promote fails over to it, WaitSynced and ReplicationOffset tell how
//     far it got;
//   - StartRedisCluster: a Redis Cluster of masters whose slots a test may
//     move with MigrateSlot, with a hook between batches;
//   - StartRedisSentinel: a Sentinel monitoring a master, and a
//     FailoverClient that finds the master through it;
//   - StartPostgres: a PostgreSQL server to kill and restart, with
//     settings of the test's (StartPostgresWith);
//   - StartPostgresStandby: a hot standby of a primary made with
//     pg_basebackup, possibly through a faultproxy.Proxy so that replication
//     can be frozen and the standby lag; Promote fails over to it;
//     StartPostgresCopy: a copy of a primary that is a server of its own.
//
// They are started, waited for and stopped by package launch, the code
// that starts internal/cmd/testservers' shared servers too. Each lives in
// the test's t.TempDir() and is killed when the test ends. Without the
// binaries (redis-server, or SNOWKEY_TEST_REDIS_SERVER; PostgreSQL's) the
// test is skipped, or fails when CI=true (testenv.Skip). Every operation
// on a server is bounded by testenv.OpTimeout, stretched by the machine's
// load.
//
// Every function and method here reports failures with t.Fatal, so it
// must be called from the goroutine running the test.
package private
