package riffle.bench;

import org.apache.flink.table.functions.ScalarFunction;

/**
 * q14's `count_char(s, c)`: how many times the first character of `c` occurs in `s` (0
 * for a NULL `s`), for scripts/bench-flink-files. The suite's own class is not on PyPI;
 * riffle runs the same function as a SQL expression (crates/riffle-bench/src/flink_suite.rs).
 */
public class CountChar extends ScalarFunction {
    public long eval(String s, String c) {
        if (s == null || c == null || c.isEmpty()) {
            return 0;
        }
        char wanted = c.charAt(0);
        long n = 0;
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == wanted) {
                n++;
            }
        }
        return n;
    }
}
