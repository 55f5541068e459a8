package io.redlock.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Order statistics over plain arrays (nearest rank, as in the rest of the suite). */
final class Stats {
  private Stats() {}

  /** The p-quantile (0..1) of {@code values} by nearest rank; NaN when empty. */
  static double percentile(double[] values, double p) {
    if (values.length == 0) {
      return Double.NaN;
    }
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int index = (int) Math.ceil(p * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
  }

  static double median(double[] values) {
    if (values.length == 0) {
      return Double.NaN;
    }
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  static double min(double[] values) {
    return Arrays.stream(values).min().orElse(Double.NaN);
  }

  static double max(double[] values) {
    return Arrays.stream(values).max().orElse(Double.NaN);
  }

  /** At most {@code limit} values, evenly spread over {@code values} (kept in their order). */
  static double[] subsample(double[] values, int limit) {
    if (values.length <= limit) {
      return values.clone();
    }
    double[] out = new double[limit];
    for (int i = 0; i < limit; i++) {
      out[i] = values[(int) ((long) i * values.length / limit)];
    }
    return out;
  }

  static double[] concat(List<double[]> parts) {
    return parts.stream().flatMapToDouble(Arrays::stream).toArray();
  }

  static double[] toArray(List<Double> values) {
    return values.stream().mapToDouble(Double::doubleValue).toArray();
  }

  static List<Double> list(double[] values) {
    List<Double> out = new ArrayList<>(values.length);
    for (double v : values) {
      out.add(v);
    }
    return out;
  }
}
