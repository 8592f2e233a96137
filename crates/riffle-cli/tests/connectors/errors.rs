//! Connector errors say what to fix, and secrets stay out of messages and plans.

use super::common::{riffle, stderr};
use super::{pipeline, run};

#[test]
fn connector_errors_say_what_to_fix_and_keep_secrets_out_of_sight() {
    let dir = tempfile::tempdir().unwrap();
    let text = "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
         WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '1K');
       CREATE TABLE out WITH ('connector' = 'postgres', 'url' = 'postgres://riffle@127.0.0.1:1/riffle',
         'password.env' = 'RIFFLE_TEST_PG_PASSWORD', 'create' = 'true');
       INSERT INTO out SELECT auction, price FROM bid;";
    let file = pipeline(dir.path(), "unreachable", text);
    let out = run(&file, &dir.path().join("state"), 1)
        .env("RIFFLE_TEST_PG_PASSWORD", "hunter2")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("PostgreSQL at 127.0.0.1:1/riffle") && err.contains("cannot connect"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password was printed: {err}");
    let explained = riffle()
        .arg("explain")
        .arg(&file)
        .env("RIFFLE_TEST_PG_PASSWORD", "hunter2")
        .output()
        .unwrap();
    assert!(
        !stderr(&explained).contains("hunter2")
            && !String::from_utf8_lossy(&explained.stdout).contains("hunter2")
    );

    let unset = riffle()
        .arg("explain")
        .arg(&file)
        .env_remove("RIFFLE_TEST_PG_PASSWORD")
        .output()
        .unwrap();
    assert!(
        stderr(&unset).contains("`RIFFLE_TEST_PG_PASSWORD`, which is not set"),
        "{}",
        stderr(&unset)
    );
    let inline = text.replace("riffle@127", "riffle:hunter2@127");
    let file = pipeline(dir.path(), "inline", &inline);
    let out = riffle()
        .arg("explain")
        .arg(&file)
        .env("RIFFLE_TEST_PG_PASSWORD", "x")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("password.env") && !err.contains("hunter2"),
        "{err}"
    );
}
