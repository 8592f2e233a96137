"""Records Apache Flink 2.3's answers to the queries of riffle's Flink-docs corpus
(crates/riffle-cli/tests/flink_docs/), the shapes of Flink's SQL query pages
(docs/dev/table/sql/queries/*), so riffle's test compares with Flink itself.

    ~/.cache/riffle-tools/flink/bin/python scripts/flink-oracle/docs_queries.py [NAME …]

PyFlink from PyPI (`apache-flink==2.3.0`, as scripts/bench-flink-files installs it) and a
Debian JDK 17. It writes, under crates/riffle-cli/tests/flink_docs/:
- `bid.jsonl`, `seller.jsonl`: the input, drawn from a fixed seed (written again only
  without NAMEs), with one row of each whose key (`auction`) is NULL. Event times rise
  with a jitter under the 4 s watermark delay, so no row
  is late; prices are distinct, so no rank depends on the order of ties.
- `flink/NAME.jsonl` for each `cases/NAME.sql` (a SELECT, after any `CREATE VIEW …;`): Flink's result as a table —
  its changelog applied (`+I`/`+U` add a row, `-U`/`-D` take one back) — one JSON object
  per row (column: value), sorted; or `flink/NAME.refused` with the first line of Flink's refusal.
Values: numbers as Python writes them, timestamps as `YYYY-MM-DD HH:MM:SS.mmm`.
"""
import datetime
import decimal
import json
import os
import random
import sys
from collections import Counter

from pyflink.table import EnvironmentSettings, TableEnvironment

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates",
                    "riffle-cli", "tests", "flink_docs")
BASE = datetime.datetime(2023, 11, 14, 23, 59, 30)
CHANNELS = ["Apple", "Google", "shop"]

BID_COLUMNS = "auction BIGINT, bidder BIGINT, price DOUBLE, channel STRING, ts TIMESTAMP(3)"
SELLER_COLUMNS = "auction BIGINT, seller STRING, rating INT, ts TIMESTAMP(3)"


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def write_input():
    rng = random.Random(50)
    prices = rng.sample(range(1000, 60000), 240)
    with open(os.path.join(HERE, "bid.jsonl"), "w") as f:
        for i in range(240):
            # 240 bids over 60 s, each up to 1.5 s early: never late for a 4 s delay.
            ms = i * 250 - rng.randrange(0, 1500) + 1500
            ts = BASE + datetime.timedelta(milliseconds=ms)
            # Three decimals, a 5 at the edge of ROUND(…, 2) for one in four.
            price = prices[i] / 1000 if i % 4 else (prices[i] // 10 * 10 + 5) / 1000
            row = {"auction": 1 + rng.randrange(6), "bidder": 100 + rng.randrange(5),
                   "price": price, "channel": rng.choice(CHANNELS), "ts": stamp(ts)}
            f.write(json.dumps(row) + "\n")
            if i == 80:
                # A bid without an auction (NULL keys: NOT IN, GROUP BY, partitions,
                # joins), in time order like the others.
                row = {"auction": None, "bidder": 100, "price": 12.345, "channel": "shop",
                       "ts": stamp(ts)}
                f.write(json.dumps(row) + "\n")
    with open(os.path.join(HERE, "seller.jsonl"), "w") as f:
        for a in range(1, 8):
            ts = BASE + datetime.timedelta(seconds=a * 7)
            row = {"auction": a, "seller": f"s{a % 3}", "rating": 1 + a % 5, "ts": stamp(ts)}
            f.write(json.dumps(row) + "\n")
        # A seller row without an auction: it empties its window's NOT IN.
        row = {"auction": None, "seller": "s9", "rating": 2,
               "ts": stamp(BASE + datetime.timedelta(seconds=45))}
        f.write(json.dumps(row) + "\n")


def value(v):
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v


def answer(env, query):
    table = Counter()
    result = env.execute_sql(query)
    names = result.get_table_schema().get_field_names()
    with result.collect() as rows:
        for r in rows:
            text = json.dumps({n: value(v) for n, v in zip(names, r)}, sort_keys=True)
            kind = str(r.get_row_kind())
            if kind in ("+I", "+U"):
                table[text] += 1
            else:
                table[text] -= 1
                if table[text] < 0:
                    raise RuntimeError(f"Flink withdrew {text}, which it had not written")
    return sorted(table.elements())


def main(names):
    if not names:
        write_input()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    for name, columns in [("bid", BID_COLUMNS), ("seller", SELLER_COLUMNS)]:
        env.execute_sql(
            f"CREATE TABLE {name} ({columns}, WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) "
            f"WITH ('connector' = 'filesystem', 'path' = '{HERE}/{name}.jsonl', "
            "'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601')")
    cases = sorted(n[:-4] for n in os.listdir(os.path.join(HERE, "cases")) if n.endswith(".sql"))
    os.makedirs(os.path.join(HERE, "flink"), exist_ok=True)
    for name in names or cases:
        query = open(os.path.join(HERE, "cases", f"{name}.sql")).read()
        base = os.path.join(HERE, "flink", name)
        for stale in [".jsonl", ".refused"]:
            if os.path.exists(base + stale):
                os.remove(base + stale)
        *views, query = [s for s in query.split(";") if s.strip()]
        try:
            for view in views:
                env.execute_sql(view)
            rows = answer(env, query)
        except Exception as e:  # Flink refuses the query (or fails it)
            said = [l for l in str(e).splitlines() if "Exception" in l] or [str(e)]
            with open(base + ".refused", "w") as f:
                f.write(said[0].strip() + "\n")
            print(f"{name}: refused by Flink: {said[0].strip()[:160]}")
            continue
        finally:
            for view in views:
                env.execute_sql(f"DROP VIEW IF EXISTS {view.split()[2]}")
        with open(base + ".jsonl", "w") as f:
            f.writelines(r + "\n" for r in rows)
        print(f"{name}: {len(rows)} rows")


main(sys.argv[1:])
