"""Records Apache Flink 2.3's reading of JSON objects and arrays into a STRING column
(its JSON format: the value's text as Jackson writes the tree back), as the expected
values of riffle's reading (crates/riffle-connectors/src/json_text_flink.tsv).

    ~/.cache/riffle-tools/flink/bin/python scripts/flink-oracle/nested_json.py \
        > crates/riffle-connectors/src/json_text_flink.tsv

PyFlink from PyPI (`apache-flink==2.3.0`, as scripts/bench-flink-files installs it) and a
Debian JDK 17. Each line: the value as written in the record's `s` field, then Flink's
STRING as a JSON string, tab-separated. Objects naming a key twice are left out (Flink
keeps the last value; riffle refuses the record).
"""
import json, os, random, tempfile
from pyflink.table import EnvironmentSettings, TableEnvironment

def chosen():
    return [
        '{"a":1,"b":[1,2.50,"x"]}',
        '[1, 2]',
        '{"a":"\\u00e9\\/\\n"}',
        '{"a":1e3,"b":1.50,"c":-0,"d":12345678901234567890123,"e":0.1}',
        '{ "a" : { } , "b":[ ], "c": null, "d": true, "f": false}',
        '{"z":1,"a":2}',
        '[{"k":"v"},[],-1.0E-2]',
        '{"a":"\\ud83d\\ude00 \\"q\\" \\\\ \\t \\b \\f \\r \\u0001 \\u001f \\u007f \\u2028"}',
        '{"a":1.0,"b":100,"c":1E+2,"d":123456789.123456789}',
        '[0.001,0.0001,9999999.0,10000000.0,1e7,1e-3,123.456e5,-0.0,0.0,0e5]',
        '[18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809]',
        '[1e300,2.5e-300,4.9e-324,1.7976931348623157e308,2.2250738585072014e-308]',
        '{"k\\"ey":{"deep":[[],{}]},"\\u00e9":1}',
        '[[[[[1]]]]]',
        '{"a":[{"b":[{"c":[]}]}]}',
    ]

def seeded(rng, depth=0):
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return str(rng.randrange(-10**6, 10**6))
    if kind == 1:
        return rng.choice(["0", "-0", "9007199254740993", "123456789012345678901"])
    if kind == 2:
        mantissa = rng.randrange(-10**rng.randrange(1, 18), 10**rng.randrange(1, 18))
        return f"{mantissa}e{rng.randrange(-30, 30)}"
    if kind == 3:
        whole, frac = rng.randrange(0, 10**rng.randrange(1, 9)), rng.randrange(0, 10**rng.randrange(1, 9))
        return f"{rng.choice(['', '-'])}{whole}.{frac}"
    if kind == 4:
        return json.dumps("".join(rng.choice(["a", "Z", " ", '"', "\\", "\n", "\t", "\u0002", "é", "😀", "/", "\u2028"]) for _ in range(rng.randrange(6))), ensure_ascii=rng.random() < 0.5)
    if kind == 5:
        return rng.choice(["true", "false", "null"])
    space = rng.choice(["", " "])
    if kind < 8:
        items = [seeded(rng, depth + 1) for _ in range(rng.randrange(4))]
        return "[" + space + ("," + space).join(items) + space + "]"
    keys = rng.sample(["a", "b", "c", "d", "key", "é", "x y", "q\\\"", "1"], rng.randrange(4))
    members = [json.dumps(k) if "\\" not in k else '"' + k + '"' for k in keys]
    return "{" + space + ("," + space).join(f"{k}{space}:{space}{seeded(rng, depth + 1)}" for k in members) + space + "}"

def values():
    rng = random.Random(51)
    out = chosen()
    while len(out) < 300:
        v = seeded(rng)
        if v[0] in "[{":
            out.append(v)
    return out

def main():
    inputs = values()
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "in.json"), "w") as f:
        for i, v in enumerate(inputs):
            f.write(f'{{"id":{i},"s":{v}}}\n')
    t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t.get_config().set("parallelism.default", "1")
    t.execute_sql(f"CREATE TABLE src (id INT, s STRING) WITH ('connector'='filesystem',"
                  f"'path'='{folder}','format'='json')")
    got = {row[0]: row[1] for row in t.execute_sql("SELECT id, s FROM src").collect()}
    for i, v in enumerate(inputs):
        print(f"{v}\t{json.dumps(got[i], ensure_ascii=False)}")

main()
