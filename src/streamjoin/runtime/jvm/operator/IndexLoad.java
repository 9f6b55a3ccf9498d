package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import org.apache.spark.api.java.function.VoidFunction;

/**
 * A task of {@link JoinIndex#load}: puts a shuffle partition's committed rows into the (reset)
 * partitions of an index in this JVM. With an outer join's {@code marker}, the rows are applied
 * as one batch before any, so that the pairs among them mark their rows matched. Written for
 * janino: no lambdas, raw collections.
 */
final class IndexLoad implements VoidFunction {
  final String name;
  final int parts;
  final int[] fields;
  BatchInput marker;

  IndexLoad(String name, int parts, int[] fields, BatchInput marker) {
    this.name = name;
    this.parts = parts;
    this.fields = fields;
    this.marker = marker;
  }

  public void call(Object rows) {
    boolean shared = SharedMarks.used(marker, fields, name);
    HashMap found =
        IndexRows.byPart((Iterator) rows, parts, Long.MIN_VALUE, fields, null, 0, shared);
    Iterator it = found.entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      IndexPart part = JoinIndex.part(name, ((Integer) e.getKey()).intValue());
      ArrayList[] sides = (ArrayList[]) e.getValue();
      synchronized (part) {
        into(part, sides, name, parts, fields, marker, shared);
      }
    }
  }

  /** Adds a partition's committed rows {@code sides} (per side) to {@code part}; with an outer
   * join's {@code marker} (else null), applied as one batch before any, so that the pairs among
   * them mark their rows matched ({@code shared}: in the index's shared marks). */
  static void into(
      IndexPart part, ArrayList[] sides, String name, int parts, int[] fields, BatchInput marker,
      boolean shared) {
    if (marker == null) {
      for (int side = 0; side < 2; side++) {
        part.addStored(sides[side], side);
        part.fit();
      }
      return;
    }
    // (As one batch before any: the pairs among the rows mark them; none is kept.)
    IndexProbe probe = new IndexProbe(name, parts, Long.MIN_VALUE + 1, fields, 0, null);
    probe.marker = marker;
    probe.marks = shared ? SharedMarks.of(name, true) : null;
    long version = part.version;
    part.version = Long.MIN_VALUE;  // (before the probe's batch: nothing taken back)
    probe.apply(part, sides, new ArrayList());
    part.version = version;
  }
}
