"""Records Apache Flink 2.3's ROUND(x, d) and TRUNCATE(x, d) of DOUBLE and FLOAT values
near the rounding edges, as the expected values of riffle's kernels
(crates/riffle-sql/src/functions/round_truncate_flink.tsv).

    ~/.cache/riffle-tools/flink/bin/python scripts/flink-oracle/round_truncate.py \
        > crates/riffle-sql/src/functions/round_truncate_flink.tsv

PyFlink from PyPI (`apache-flink==2.3.0`, as scripts/bench-flink-files installs it) and a
Debian JDK 17. Each line: function, type, x (as written in the CAST), digits, Flink's
answer (Python's repr of the float: the shortest text that reads back as it), tab-separated.
"""
import random
from pyflink.table import EnvironmentSettings, TableEnvironment

def inputs():
    xs = ["0.285", "-0.285", "10.03", "-10.03", "2.675", "1.005", "1.015", "0.125", "0.5",
          "1.5", "2.5", "-2.5", "1234.5", "1250", "-1250", "0", "-0.0", "123456789.125",
          "1e-7", "5e-5", "0.045", "9.995", "99.995", "1e300", "-1e300", "4.35", "4.45",
          "8.325", "0.1", "0.7", "1.1", "3.3", "123.455", "1e16", "12345678912345.675",
          ]
    rng = random.Random(50)
    for _ in range(120):
        # Decimal texts with a 5 at the edge: the cases binary doubles round either way.
        whole = rng.choice([0, 1, 7, 42, 999, 123456])
        frac = rng.randrange(0, 1000)
        sign = rng.choice(["", "-"])
        xs.append(f"{sign}{whole}.{frac:03d}5")
    for _ in range(40):
        xs.append(repr(rng.uniform(-1000, 1000)))
    return xs

def values_of(xs):
    return ", ".join(f"('{x}')" for x in xs)

def main():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    xs = inputs()
    values = values_of(xs)
    for fn in ["ROUND", "TRUNCATE"]:
        for ty in ["DOUBLE", "FLOAT"]:
            # 1e300 is no FLOAT (CAST makes it infinite, which fails ROUND's job), and
            # TRUNCATE of it fails the job (it passes through a DECIMAL(38, …)).
            keep = ty == "DOUBLE" and fn == "ROUND"
            finite = values_of([x for x in xs if keep or "e300" not in x])
            for d in [-2, -1, 0, 1, 2, 3]:
                q = f"SELECT s, {fn}(CAST(s AS {ty}), {d}) FROM (VALUES {finite}) AS t(s)"
                with env.execute_sql(q).collect() as rows:
                    for r in rows:
                        print(f"{fn}\t{ty}\t{r[0]}\t{d}\t{r[1]!r}")
    non_finite(env)

def non_finite(env):
    """Flink's answer for NaN, the infinities and 1e300, one query each: a failed job
    is `fails`."""
    for fn in ["ROUND", "TRUNCATE"]:
        for x in ["NaN", "Infinity", "-Infinity", "1e300"]:
            q = f"SELECT {fn}(CAST('{x}' AS DOUBLE), 2)"
            try:
                with env.execute_sql(q).collect() as rows:
                    answer = repr(next(iter(rows))[0])
            except Exception:  # the job failed
                answer = "fails"
            print(f"{fn}\tDOUBLE\t{x}\t2\t{answer}")

main()
