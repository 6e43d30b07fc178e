/* Workload driver for the SQLite amalgamation: a speedtest1-like SQL mix.
 *
 *   sqlite_driver ROWS SEED
 *
 * Builds an in-memory database of ROWS rows from a seeded generator, then runs inserts,
 * indexed and unindexed selects, range scans, joins, GROUP BY and ORDER BY sorts, LIKE and
 * text functions, updates, deletes, a CTE, a window function and an integrity check.  Every
 * result row is folded into a 64-bit FNV-1a hash that is printed per phase, so two builds of
 * the same source can be compared byte for byte.  ROWS/SEED choose the input: the profiling
 * run and the measuring run use different values (bench/bench_e2e.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sqlite3.h"

static sqlite3 *db;
static uint64_t rng_state;
static uint64_t hash;

static uint64_t rnd(void) { /* splitmix64: deterministic, portable */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void fold(const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) hash = (hash ^ s[i]) * 0x100000001B3ull;
}

static void die(const char *what) {
  fprintf(stderr, "sqlite_driver: %s: %s\n", what, sqlite3_errmsg(db));
  exit(1);
}

static void exec(const char *sql) {
  char *err = 0;
  if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
    fprintf(stderr, "sqlite_driver: %s: %s\n", sql, err);
    exit(1);
  }
}

static sqlite3_stmt *prep(const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, 0) != SQLITE_OK) die(sql);
  return st;
}

/* step a statement to the end, folding every column of every row into the hash */
static long drain(sqlite3_stmt *st) {
  long rows = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    rows++;
    for (int i = 0, n = sqlite3_column_count(st); i < n; i++) {
      const unsigned char *t = sqlite3_column_text(st, i);
      if (t) fold(t, (size_t)sqlite3_column_bytes(st, i));
      fold("|", 1);
    }
  }
  if (rc != SQLITE_DONE) die("step");
  sqlite3_reset(st);
  return rows;
}

static void query(const char *sql) {
  sqlite3_stmt *st = prep(sql);
  drain(st);
  sqlite3_finalize(st);
}

static const char *const words[] = {
  "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
  "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
  "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
  "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
#define NWORDS (sizeof words / sizeof words[0])

static void phrase(char *buf, size_t cap, uint64_t n) {
  buf[0] = 0;
  size_t len = 0;
  int k = 2 + (int)(n % 5);
  for (int i = 0; i < k; i++) {
    const char *w = words[(n >> (i * 5)) % NWORDS];
    len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? " " : "", w);
  }
}

static void phase(const char *name) {
  printf("%-12s %016llx\n", name, (unsigned long long)hash);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: sqlite_driver ROWS SEED\n");
    return 2;
  }
  long n = atol(argv[1]);
  rng_state = strtoull(argv[2], 0, 10);
  hash = 0xCBF29CE484222325ull;
  if (n < 10) n = 10;
  /* SQLite seeds its PRNG from /dev/urandom; VACUUM names its scratch schema with it.  A
   * fixed seed makes every run take the same path, which the exact measures need. */
  sqlite3_test_control(SQLITE_TESTCTRL_PRNG_SEED, 1, (sqlite3 *)0);
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) die("open");
  exec("PRAGMA cache_size=-8000");
  exec("CREATE TABLE t1(a INTEGER, b INTEGER, c TEXT);"
       "CREATE TABLE t2(a INTEGER PRIMARY KEY, b INTEGER, c TEXT);"
       "CREATE TABLE t3(k TEXT PRIMARY KEY, v REAL) WITHOUT ROWID;");

  /* inserts, in one transaction each, with bound parameters */
  char buf[256];
  exec("BEGIN");
  sqlite3_stmt *ins1 = prep("INSERT INTO t1 VALUES(?1,?2,?3)");
  sqlite3_stmt *ins2 = prep("INSERT INTO t2 VALUES(?1,?2,?3)");
  for (long i = 1; i <= n; i++) {
    uint64_t r = rnd();
    phrase(buf, sizeof buf, r);
    sqlite3_bind_int64(ins1, 1, i);
    sqlite3_bind_int64(ins1, 2, (sqlite3_int64)(r % (uint64_t)n));
    sqlite3_bind_text(ins1, 3, buf, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(ins1) != SQLITE_DONE) die("insert t1");
    sqlite3_reset(ins1);
    sqlite3_bind_int64(ins2, 1, (sqlite3_int64)((r >> 17) % (uint64_t)(4 * n)) * 4 + 1 + (i & 3));
    sqlite3_bind_int64(ins2, 2, i);
    sqlite3_bind_text(ins2, 3, buf, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(ins2); /* duplicate keys are part of the workload */
    if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT) die("insert t2");
    sqlite3_reset(ins2);
  }
  sqlite3_finalize(ins1);
  sqlite3_finalize(ins2);
  exec("INSERT OR REPLACE INTO t3 SELECT c || '-' || a, b * 0.5 FROM t1");
  exec("COMMIT");
  query("SELECT count(*), sum(b), total(length(c)) FROM t1");
  phase("insert");

  /* unindexed selects: full scans with a range predicate and a LIKE */
  sqlite3_stmt *scan = prep("SELECT count(*), avg(b), max(c) FROM t1 WHERE b BETWEEN ?1 AND ?2");
  for (int i = 0; i < 40; i++) {
    uint64_t lo = rnd() % (uint64_t)n;
    sqlite3_bind_int64(scan, 1, (sqlite3_int64)lo);
    sqlite3_bind_int64(scan, 2, (sqlite3_int64)(lo + (uint64_t)n / 20));
    drain(scan);
  }
  sqlite3_finalize(scan);
  sqlite3_stmt *like = prep("SELECT count(*) FROM t1 WHERE c LIKE ?1");
  for (int i = 0; i < 20; i++) {
    snprintf(buf, sizeof buf, "%%%s%%%s%%", words[rnd() % NWORDS], words[rnd() % NWORDS]);
    sqlite3_bind_text(like, 1, buf, -1, SQLITE_TRANSIENT);
    drain(like);
  }
  sqlite3_finalize(like);
  phase("scan");

  /* indexes, then indexed point and range lookups */
  exec("CREATE INDEX t1b ON t1(b); CREATE INDEX t1c ON t1(c); CREATE INDEX t2b ON t2(b)");
  sqlite3_stmt *pt = prep("SELECT a, c FROM t1 WHERE b = ?1");
  sqlite3_stmt *rg = prep("SELECT count(*), sum(a) FROM t1 WHERE b >= ?1 AND b < ?2");
  sqlite3_stmt *pk = prep("SELECT b, c FROM t2 WHERE a = ?1");
  sqlite3_stmt *tx = prep("SELECT a FROM t1 WHERE c >= ?1 ORDER BY c LIMIT 5");
  for (long i = 0; i < n; i++) {
    uint64_t r = rnd();
    sqlite3_bind_int64(pt, 1, (sqlite3_int64)(r % (uint64_t)n));
    drain(pt);
    sqlite3_bind_int64(pk, 1, (sqlite3_int64)(r % (uint64_t)(16 * n)));
    drain(pk);
    if (i % 8 == 0) {
      sqlite3_bind_int64(rg, 1, (sqlite3_int64)(r % (uint64_t)n));
      sqlite3_bind_int64(rg, 2, (sqlite3_int64)(r % (uint64_t)n + 50));
      drain(rg);
      phrase(buf, sizeof buf, r >> 7);
      sqlite3_bind_text(tx, 1, buf, -1, SQLITE_TRANSIENT);
      drain(tx);
    }
  }
  sqlite3_finalize(pt);
  sqlite3_finalize(rg);
  sqlite3_finalize(pk);
  sqlite3_finalize(tx);
  phase("indexed");

  /* joins, grouping, sorting, CTE, window function */
  query("SELECT t1.b % 100, count(*), sum(t2.a) FROM t1 JOIN t2 ON t2.b = t1.a "
        "WHERE t1.a % 3 = 0 GROUP BY 1 ORDER BY 3 DESC LIMIT 20");
  query("SELECT c, count(*) AS k FROM t1 GROUP BY c HAVING k > 1 ORDER BY k DESC, c LIMIT 50");
  query("SELECT a, b, c FROM t1 ORDER BY c DESC, b LIMIT 100 OFFSET 10");
  query("SELECT upper(substr(c, 1, 8)), length(c), instr(c, 'o') FROM t2 ORDER BY b % 97, a "
        "LIMIT 200");
  query("SELECT x.a, y.a FROM t1 AS x JOIN t1 AS y ON y.b = x.a WHERE x.a < 200 ORDER BY 1, 2");
  query("WITH RECURSIVE r(i, s) AS (SELECT 1, 1 UNION ALL SELECT i + 1, (s * 7 + i) % 1000003 "
        "FROM r WHERE i < 5000) SELECT sum(s), max(s) FROM r");
  query("SELECT b, sum(a) OVER (ORDER BY b ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) "
        "FROM t1 WHERE a % 50 = 0 ORDER BY b LIMIT 100");
  query("SELECT count(DISTINCT b), group_concat(DISTINCT substr(c, 1, 2)) FROM t1");
  query("SELECT printf('%.3f', avg(v)), min(k), max(k) FROM t3");
  phase("join-sort");

  /* updates and deletes, indexed and not */
  exec("BEGIN");
  sqlite3_stmt *up = prep("UPDATE t1 SET b = b + 1, c = c || 'x' WHERE rowid = ?1");
  for (long i = 0; i < n / 4; i++) {
    sqlite3_bind_int64(up, 1, (sqlite3_int64)(rnd() % (uint64_t)n) + 1);
    if (sqlite3_step(up) != SQLITE_DONE) die("update");
    sqlite3_reset(up);
  }
  sqlite3_finalize(up);
  up = prep("UPDATE t1 SET c = substr(c, 2) WHERE a = ?1"); /* unindexed: a full scan each */
  for (int i = 0; i < 10; i++) {
    sqlite3_bind_int64(up, 1, (sqlite3_int64)(rnd() % (uint64_t)n) + 1);
    if (sqlite3_step(up) != SQLITE_DONE) die("update");
    sqlite3_reset(up);
  }
  sqlite3_finalize(up);
  exec("UPDATE t2 SET c = replace(c, 'a', 'A') WHERE b % 7 = 1");
  exec("DELETE FROM t1 WHERE b % 11 = 3");
  exec("DELETE FROM t3 WHERE v < 10.0");
  exec("COMMIT");
  query("SELECT count(*), sum(b), sum(length(c)) FROM t1");
  query("SELECT count(*), sum(v) FROM t3");
  phase("update");

  query("PRAGMA integrity_check");
  exec("DROP INDEX t1c; VACUUM");
  query("SELECT count(*) FROM t1 NATURAL JOIN t2");
  phase("final");
  sqlite3_close(db);
  return 0;
}
