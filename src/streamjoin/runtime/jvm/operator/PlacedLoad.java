package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapFunction2;

/**
 * A build task of a {@link PlacedIndex}: on the executor that will own partition {@code p}, it
 * loads the partition from its rows of the committed units (an outer join's marks and decided
 * bounds too) and answers with the partition and where it lies.
 * Written for janino: no lambdas, raw collections.
 */
final class PlacedLoad implements FlatMapFunction2 {
  final String name;
  final int parts;
  final long version;
  final int[] fields;
  BatchInput marker;
  long[] decided;
  long memory;  // (the index's, as JoinIndex.reset takes it)

  PlacedLoad(String name, int parts, long version, int[] fields) {
    this.name = name;
    this.parts = parts;
    this.version = version;
    this.fields = fields;
  }

  public Iterator call(Object placed, Object rows) {
    int p = PlacedIndex.partOf((Iterator) placed);
    IndexPart part = new IndexPart(version, memory);
    // (In PARTS before it loads, so that the JVM's partitions share the memory with it
    // counted; gone again, its spill files deleted, if the load fails.)
    String at = name + "/" + p;
    JoinIndex.closed(JoinIndex.PARTS.put(at, part));
    boolean copies = SharedMarks.used(marker, fields);  // (each copy marked apart)
    try {
      ArrayList[] sides = (ArrayList[]) IndexRows.byPart(
              (Iterator) rows, parts, Long.MIN_VALUE, fields, null, 0, copies)
          .get(Integer.valueOf(p));
      synchronized (part) {
        if (sides != null) {
          IndexLoad.into(part, sides, name, parts, fields, marker, false);
        }
        if (marker != null) {
          part.decidedBefore(decided[0], decided[1]);
        }
      }
    } catch (RuntimeException e) {
      JoinIndex.PARTS.remove(at, part);
      JoinIndex.closed(part);
      throw e;
    }
    ArrayList out = new ArrayList();
    out.add(new scala.Tuple2(Integer.valueOf(p), PlacedIndex.here()));
    return out.iterator();
  }
}
