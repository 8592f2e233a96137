"""The driver of scripts/bench-flink-files: writes the input with riffle, then runs each
query in riffle and in Flink and prints one Markdown table. Run by that script."""

import os
import resource
import subprocess
import sys
import time

TABLES = {
    "person": "id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, "
    "state VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR",
    "auction": "id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, "
    "`dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
    "`dateTime` TIMESTAMP(3), extra VARCHAR",
}
# The tables each query reads: their rows are the query's input rows (bids by default).
READS = {
    "q3": ["auction", "person"],
    "q4": ["auction", "bid"],
    "q6_corrected": ["auction", "bid"],
    "q8": ["auction", "person"],
    "q9": ["auction", "bid"],
}
# q14's UDF as a SQL expression, as riffle's own suite runs it.
COUNT_CHAR_SQL = (
    "CREATE FUNCTION count_char(s VARCHAR, c VARCHAR) RETURNS BIGINT AS "
    "'CASE WHEN s IS NULL THEN 0 ELSE char_length(s) - char_length(replace(s, substr(c, 1, 1), '''')) END'"
)
SUITE = "crates/riffle-bench/flink-suite"


def log(message):
    print(f"bench-flink-files: {message}", file=sys.stderr, flush=True)


def sources(work, extra_options):
    return "".join(
        f"CREATE TABLE {name} ({columns}, WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = '{work}/{name}', 'format' = 'json'{extra_options});\n"
        for name, columns in TABLES.items()
    )


def write_input(riffle, work, events):
    script = "".join(
        f"CREATE TABLE gen_{name} ({columns}) WITH ('connector' = 'nexmark', 'event_type' = '{name}', 'events' = '{events}');\n"
        f"CREATE TABLE {name}_out WITH ('connector' = 'filesystem', 'path' = '{work}/{name}', 'format' = 'json');\n"
        f"INSERT INTO {name}_out SELECT * FROM gen_{name};\n"
        for name, columns in TABLES.items()
    )
    with open(f"{work}/write.sql", "w") as f:
        f.write(script)
    subprocess.run([riffle, "run", f"{work}/write.sql", "--state", f"{work}/write-state", "-p", "2"],
                   check=True, capture_output=True)
    rows = {}
    for name in TABLES:
        folder = f"{work}/{name}"
        rows[name] = sum(sum(1 for _ in open(f"{folder}/{f}", "rb")) for f in os.listdir(folder))
    return rows


def query_text(work, query, engine):
    """The suite's text of `query` with the stand-ins both engines get (see
    scripts/bench-flink-files) for what it names outside its DDL."""
    text = open(f"{SUITE}/{query}.sql").read()
    text = text.replace("file://${NEXMARK_DIR}/data/output/${SUBMIT_TIME}/bid/", f"file://{work}/q10-{engine}/")
    if "CREATE TABLE side_input" in text:
        start = text.index("CREATE TABLE side_input")
        end = text.index(";", start)
        skip_header = ", 'csv.ignore-parse-errors' = 'true'" if engine == "flink" else ""
        text = (text[:start] + "CREATE TABLE side_input (key BIGINT, `value` VARCHAR) WITH ("
                f"'connector' = 'filesystem', 'path' = '{work}/side_input/side_input.csv', 'format' = 'csv'{skip_header})"
                + text[end:])
    if engine == "riffle":
        text = text.replace("CREATE FUNCTION count_char AS 'com.github.nexmark.flink.udf.CountChar'", COUNT_CHAR_SQL)
    else:
        text = text.replace("'com.github.nexmark.flink.udf.CountChar'", "'riffle.bench.CountChar'")
    return text


def write_side_input(work):
    os.makedirs(f"{work}/side_input", exist_ok=True)
    with open(f"{work}/side_input/side_input.csv", "w") as f:
        f.write("key,value\n" + "".join(f"{k},side {k}\n" for k in range(10_000)))


def run_riffle(riffle, work, query, parallelism):
    """Seconds riffle reports, and the CPU seconds of its process."""
    path = f"{work}/riffle-{query}.sql"
    with open(path, "w") as f:
        f.write(sources(work, "") + query_text(work, query, "riffle"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([riffle, "run", path, "--state", f"{work}/state-{query}", "-p", str(parallelism),
                          "--checkpoint-interval", "1s"], check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = next(float(line.split(" finished in ")[1].split("s")[0])
                   for line in out.stderr.splitlines() if " finished in " in line)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def jvm_cpu_seconds():
    """User+system seconds of this process's child processes (PyFlink's JVM)."""
    me, total = str(os.getpid()), 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_flink(work, query, parallelism):
    """The job's net runtime in seconds, and the JVM's CPU seconds while it ran. Each
    query runs in a fresh Python process, so each has a fresh JVM."""
    code = f"""
import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from bench_flink_files import flink_job
flink_job({work!r}, {query!r}, {parallelism})
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        # The innermost cause says why (e.g. a construct it does not run).
        causes = [line.strip() for line in out.stderr.splitlines()
                  if "Exception:" in line or line.strip().startswith("Caused by:")]
        raise FlinkFailed((causes[-1] if causes else "failed")[:300])
    seconds, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), float(cpu)


class FlinkFailed(Exception):
    """Flink did not run a query: riffle's row then stands alone."""


def flink_job(work, query, parallelism):
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", str(parallelism))
    config.set("execution.checkpointing.interval", "1s")
    # Checkpoints to local files, as riffle's (the default keeps them in the
    # JobManager's memory, capped at 5 MB: q5's state outgrows it and every checkpoint
    # then fails the job).
    config.set("execution.checkpointing.storage", "filesystem")
    config.set("execution.checkpointing.dir", f"file://{work}/flink-checkpoints-{query}")
    jar = os.environ.get("RIFFLE_FLINK_UDF_JAR")
    if jar and os.path.exists(jar):
        config.set("pipeline.jars", f"file://{jar}")
    text = sources(work, ", 'json.timestamp-format.standard' = 'ISO-8601'") + query_text(work, query, "flink")
    text = "\n".join(line.split("--")[0] for line in text.splitlines())
    statements = [s.strip() for s in text.split(";") if s.strip()]
    for statement in statements[:-1]:
        env.execute_sql(statement)
    before = jvm_cpu_seconds()
    result = env.execute_sql(statements[-1])
    runtime_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
    print(runtime_ms / 1000, jvm_cpu_seconds() - before)


def main():
    riffle, work, events, parallelism, queries = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    log(f"writing {events} Nexmark events as JSON lines")
    rows = write_input(riffle, work, events)
    log(f"rows: {rows}")
    write_side_input(work)
    print(f"| query ({events} events, JSON lines, p{parallelism}, 1 s checkpoints) | input rows | riffle s | riffle CPU s "
          f"| Flink s | Flink CPU s | riffle / Flink, time | riffle / Flink, per core |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for query in queries:
        input_rows = sum(rows[t] for t in READS.get(query, ["bid"]))
        log(f"{query}: riffle")
        r_s, r_cpu = run_riffle(riffle, work, query, parallelism)
        log(f"{query}: Flink")
        try:
            f_s, f_cpu = run_flink(work, query, parallelism)
        except FlinkFailed as e:
            log(f"{query}: Flink failed: {e}")
            print(f"| {query} | {input_rows:,} | {r_s:.2f} | {r_cpu:.2f} | Flink fails: {e} | | | |", flush=True)
            continue
        ratios.append((f_s / r_s, f_cpu / r_cpu))
        print(f"| {query} | {input_rows:,} | {r_s:.2f} | {r_cpu:.2f} | {f_s:.2f} | {f_cpu:.2f} "
              f"| {f_s / r_s:.1f}× | {f_cpu / r_cpu:.1f}× |", flush=True)
    by_time = sorted(r[0] for r in ratios)
    by_cpu = sorted(r[1] for r in ratios)
    median = lambda v: v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    print(f"\nriffle / Flink: time median {median(by_time):.1f}×, minimum {by_time[0]:.1f}×; "
          f"per core median {median(by_cpu):.1f}×, minimum {by_cpu[0]:.1f}×")


if __name__ == "__main__":
    main()
