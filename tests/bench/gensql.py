"""bench: write an SQL script for sqlite3 (inserts, an index, joins,
group by, updates, deletes) to standard output."""
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 60000
rnd = random.Random(7)
out = sys.stdout
out.write("PRAGMA journal_mode=OFF;\nCREATE TABLE t(id INTEGER PRIMARY KEY,"
          " name TEXT, grp INTEGER, v REAL);\nCREATE TABLE g(grp INTEGER"
          " PRIMARY KEY, label TEXT);\nBEGIN;\n")
for i in range(200):
    out.write("INSERT INTO g VALUES(%d,'group-%d');\n" % (i, i))
for i in range(n):
    out.write("INSERT INTO t(name,grp,v) VALUES('%s',%d,%f);\n" %
              ("n%x" % rnd.getrandbits(40) * rnd.randint(1, 4),
               rnd.randrange(200), rnd.random()))
out.write("COMMIT;\nCREATE INDEX t_name ON t(name);\n")
for i in range(20):
    out.write("SELECT g.label, count(*), avg(t.v), group_concat(substr(t.name,1,3))"
              " FROM t JOIN g USING(grp) WHERE t.v > %f GROUP BY g.label"
              " ORDER BY 2 DESC LIMIT 3;\n" % (i / 20))
    out.write("UPDATE t SET name = name || 'x' WHERE grp = %d;\n" % i)
    out.write("DELETE FROM t WHERE id %% 97 = %d;\n" % i)
out.write("SELECT count(*), sum(length(name)) FROM t;\n")
