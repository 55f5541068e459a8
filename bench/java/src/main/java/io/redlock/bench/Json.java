package io.redlock.bench;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.List;
import java.util.Map;

/** Just enough JSON output for the fragments (maps, lists, strings, numbers, booleans). */
final class Json {
  private Json() {}

  static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(out, value, 0);
    return out.append('\n').toString();
  }

  private static void write(StringBuilder out, Object value, int depth) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String s) {
      string(out, s);
    } else if (value instanceof Boolean b) {
      out.append(b);
    } else if (value instanceof Integer || value instanceof Long) {
      out.append(value);
    } else if (value instanceof Number n) {
      number(out, n.doubleValue(), 3);
    } else if (value instanceof double[] samples) {
      // Latency samples: one line, one decimal.
      out.append('[');
      for (int i = 0; i < samples.length; i++) {
        if (i > 0) {
          out.append(", ");
        }
        number(out, samples[i], 1);
      }
      out.append(']');
    } else if (value instanceof Map<?, ?> map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        out.append(first ? "\n" : ",\n").append("  ".repeat(depth + 1));
        first = false;
        string(out, String.valueOf(entry.getKey()));
        out.append(": ");
        write(out, entry.getValue(), depth + 1);
      }
      out.append(first ? "}" : "\n" + "  ".repeat(depth) + "}");
    } else if (value instanceof List<?> list) {
      boolean flat = list.stream().allMatch(v -> v instanceof Number);
      out.append('[');
      for (int i = 0; i < list.size(); i++) {
        if (flat) {
          out.append(i > 0 ? ", " : "");
        } else {
          out.append(i > 0 ? ",\n" : "\n").append("  ".repeat(depth + 1));
        }
        write(out, list.get(i), depth + 1);
      }
      out.append(flat || list.isEmpty() ? "]" : "\n" + "  ".repeat(depth) + "]");
    } else {
      throw new IllegalArgumentException("not JSON: " + value.getClass());
    }
  }

  private static void number(StringBuilder out, double v, int decimals) {
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      out.append("null");
      return;
    }
    String text =
        BigDecimal.valueOf(v).setScale(decimals, RoundingMode.HALF_EVEN).stripTrailingZeros()
            .toPlainString();
    out.append(text.equals("-0") ? "0" : text);
  }

  private static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }
}
