package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * A row as the join operator keeps it ({@link Entry}: its key, bucket, places, event time and
 * the row in Spark's internal form) and where it goes: the partition of its key as Spark's
 * shuffle computes it, or each partition a scheme's places name ({@link #byPart} makes a copy
 * in each). The indexes themselves are {@link JoinIndex}'s. Written for Spark's own Java compiler
 * (janino): no lambdas, raw collections.
 */
final class IndexRows {
  private IndexRows() {}

  /** One row of a probe's input or of the committed rows loaded: stored in its partition's
   * table under {@code key}, and probing the other side's table (a band's row: each bucket of
   * its range). A placed row's copy (one per partition its places name: {@link #byPart}) may
   * only store or only probe. */
  static final class Entry {
    final long key;  // (the table's key: the equality key's hash, mixed with the row's bucket)
    final long eq;  // (the equality key's hash; 0 for a band without one)
    final long bucket;  // (a band row's own bucket)
    final long place;  // (the partition's key: the equality key's hash, or a scheme's place)
    final long ts;
    final long batch;
    final InternalRow row;
    final boolean ranged;
    final long lo;
    final long hi;
    final boolean store;
    final boolean probe;
    final int tab;  // (the table: which of an OR's keys; 0 for one key)
    boolean matched;  // (an outer join's: a partner matched it in this batch's probe)
    // (An outer join's row with several copies: its identity in the index's shared marks
    // (SharedMarks.MARKS), and whether this copy is one that never decides: all but the first
    // stored.)
    long id;
    boolean copy;
    boolean skips;  // (shedding: it skipped its probe in this batch)
    int at = -1;  // (its slot once stored)

    Entry(
        long eq,
        long bucket,
        long place,
        long ts,
        long batch,
        InternalRow row,
        boolean ranged,
        long lo,
        long hi,
        boolean store,
        boolean probe,
        int tab) {
      this.key = ranged ? mix(eq, bucket) : eq;
      this.eq = eq;
      this.bucket = bucket;
      this.place = place;
      this.ts = ts;
      this.batch = batch;
      this.row = row;
      this.ranged = ranged;
      this.lo = lo;
      this.hi = hi;
      this.store = store;
      this.probe = probe;
      this.tab = tab;
    }
  }

  /** A copy of {@code e} at place {@code place} that stores and probes as told: a row's copy
   * in each partition its places ({@code _sj_ss}, {@code _sj_ps}) name, made in the task. */
  static Entry copyOf(Entry e, long place, boolean store, boolean probe) {
    Entry c =
        new Entry(
            e.eq, e.bucket, place, e.ts, e.batch, e.row, e.ranged, e.lo, e.hi, store, probe, e.tab);
    c.id = e.id;
    return c;
  }

  /** The identity of row {@code row} of side {@code side}: a hash of its bytes. */
  static long rowId(InternalRow row, int side) {
    if (row instanceof UnsafeRow) {
      UnsafeRow u = (UnsafeRow) row;
      return XXH64.hashUnsafeBytes(u.getBaseObject(), u.getBaseOffset(), u.getSizeInBytes(), side);
    }
    return XXH64.hashLong(row.hashCode(), side);
  }

  /** The table's key of a band row with equality hash {@code eq} in bucket {@code bucket}:
   * for one {@code eq}, distinct buckets give distinct keys (a bijection of {@code eq ^ bucket *
   * odd}), so a probe of a range of buckets finds each stored row once. */
  static long mix(long eq, long bucket) {
    long h = eq ^ (bucket * 0x9E3779B97F4A7C15L);
    h = (h ^ (h >>> 30)) * 0xBF58476D1CE4E5B9L;
    h = (h ^ (h >>> 27)) * 0x94D049BB133111EBL;
    return h ^ (h >>> 31);
  }

  /** The shuffle partition of key hash {@code key}, as {@code repartition(parts, _sj_key)}
   * placed it (Spark's HashPartitioning: Murmur3 with seed 42, then a non-negative modulo). */
  static int partOf(long key, int parts) {
    int h = Murmur3_x86_32.hashLong(key, 42) % parts;
    return h < 0 ? h + parts : h;
  }

  /** The partition of entry {@code e} of an input whose {@code fields} are given: a scheme's
   * place modulo the partitions (one place a partition), else its equality key's shuffle
   * partition. */
  static int partition(Entry e, int parts, int[] fields) {
    return fields[STORES] >= 0 ? (int) Math.floorMod(e.place, (long) parts) : partOf(e.eq, parts);
  }

  /** Each partition's rows of {@code rows}, as an entry list per side, by partition; with
   * {@code counts}, the rows of each of its units (a unit of the skew check: the row's place,
   * or its equality key's hash as a non-negative long, modulo the units) counted in it. With
   * {@code shared} (an outer join's marks shared by a row's copies: {@link SharedMarks#used}),
   * each copy carries the row's identity, and all but its first stored one are {@code copy}:
   * a placed row's in the partition of its first store place, told by {@code _sj_hm} where a
   * shuffle sent each partition its copy ({@link #shuffled}), and in an OR's first table. */
  static HashMap byPart(
      Iterator rows,
      int parts,
      long batch,
      int[] fields,
      long[] counts,
      int units,
      boolean shared) {
    HashMap out = new HashMap();
    boolean copies = fields[STORES] >= 0;
    boolean[] store = new boolean[parts];
    boolean[] probe = new boolean[parts];
    boolean[] taken = new boolean[parts];
    long[] at = new long[parts];
    while (rows.hasNext()) {
      InternalRow r = (InternalRow) rows.next();
      Entry e = entry(r, batch, fields);
      if (e == null) {
        continue;
      }
      if (!copies) {
        if (shared) {  // (an OR's copy of the row for each table: the first table's decides)
          e.id = rowId(e.row, r.getInt(0));
          e.copy = e.tab != 0;
        }
        add(out, e, r.getInt(0), parts, fields, counts, units);
        continue;
      }
      java.util.Arrays.fill(store, false);
      java.util.Arrays.fill(probe, false);
      java.util.Arrays.fill(taken, false);
      places(r, fields[STORES], store, at, taken);
      places(r, fields[PROBES], probe, at, taken);
      int home = -1;  // (the deciding copy's partition; ALL: this shuffled copy's)
      if (shared) {
        e.id = rowId(e.row, r.getInt(0));
        boolean shuffled = fields[HOME] >= 0;
        home = shuffled ? (r.getBoolean(fields[HOME]) ? ALL : -1) : first(r, fields[STORES], parts);
      }
      for (int p = 0; p < parts; p++) {
        if (store[p] || probe[p]) {
          Entry c = copyOf(e, at[p], store[p], probe[p] && e.probe);
          c.copy = shared && (e.tab != 0 || (home != p && home != ALL));
          add(out, c, r.getInt(0), parts, fields, counts, units);
        }
      }
    }
    return out;
  }

  /** Adds entry {@code e} of side {@code side} to its partition's list in {@code out}, counted
   * in its unit where {@code units} is above 0. */
  static void add(
      HashMap out, Entry e, int side, int parts, int[] fields, long[] counts, int units) {
    if (units > 0) {
      long unit = fields[STORES] >= 0 ? e.place : e.eq;
      counts[(int) ((unit & Long.MAX_VALUE) % units)]++;
    }
    Integer p = Integer.valueOf(partition(e, parts, fields));
    ArrayList[] sides = (ArrayList[]) out.get(p);
    if (sides == null) {
      sides = new ArrayList[] {new ArrayList(), new ArrayList()};
      out.put(p, sides);
    }
    sides[side].add(e);
  }

  /** The partition of the first place in array column {@code column} of {@code r}; -1: none. */
  static int first(InternalRow r, int column, int parts) {
    if (r.isNullAt(column)) {
      return -1;
    }
    org.apache.spark.sql.catalyst.util.ArrayData a = r.getArray(column);
    if (a.numElements() == 0 || a.isNullAt(0)) {
      return -1;
    }
    return (int) Math.floorMod(a.getLong(0), (long) parts);
  }

  /** Flags in {@code in} the partitions of the places in array column {@code column} of
   * {@code r} (a place's partition: the place modulo the partitions; NULL: none), and records in
   * {@code at} the first place of each partition not yet {@code taken}: the copy's place, by
   * which its unit is counted. (One copy a partition, which probes the row's whole range there:
   * two places in one partition would find its rows twice.) */
  static void places(InternalRow r, int column, boolean[] in, long[] at, boolean[] taken) {
    if (r.isNullAt(column)) {
      return;
    }
    org.apache.spark.sql.catalyst.util.ArrayData a = r.getArray(column);
    for (int i = 0; i < a.numElements(); i++) {
      if (!a.isNullAt(i)) {
        long place = a.getLong(i);
        int p = (int) Math.floorMod(place, (long) in.length);
        in[p] = true;
        if (!taken[p]) {
          taken[p] = true;
          at[p] = place;
        }
      }
    }
  }

  // Positions in a probe's {@code fields} (see {@link #fields}): each side's struct's field
  // count, then the columns that may follow the first five (-1: absent).
  static final int LO = 2;
  static final int HI = 3;
  static final int BUCKET = 4;
  static final int PROBE = 5;
  static final int TAB = 6;
  static final int STORES = 7;
  static final int PROBES = 8;
  static final int HOME = 9;
  static final int ALL = -2;

  /** The entry of input row {@code r} (its side's struct copied: the shuffle reuses its rows);
   * null for a NULL key. A band's row ({@code _sj_bk}, its range {@code _sj_lo} to {@code
   * _sj_hi}: NULL bounds are an empty range); a placed row (a scheme's, a keyless band's runs,
   * time buckets), whose places are arrays ({@code _sj_ss} where it is stored, {@code _sj_ps}
   * where it probes: {@link #byPart} makes its copies); else an equality key's row, which stores
   * and probes in the partition of its key ({@code _sj_probe} false: an outer join's row that
   * meets nothing, only stored). */
  static Entry entry(InternalRow r, long batch, int[] fields) {
    if (r.isNullAt(1)) {
      return null;
    }
    long ts = r.isNullAt(2) ? Long.MAX_VALUE : r.getLong(2);
    int side = r.getInt(0);
    InternalRow row = r.getStruct(3 + side, fields[side]).copy();
    long eq = r.getLong(1);
    long place = eq;
    boolean store = true;
    boolean probe = fields[PROBE] < 0 || r.getBoolean(fields[PROBE]);
    int tab = fields[TAB] < 0 ? 0 : r.getInt(fields[TAB]);
    int lo = fields[LO];
    int hi = fields[HI];
    if (lo < 0) {
      return new Entry(eq, 0L, place, ts, batch, row, false, 0L, -1L, store, probe, tab);
    }
    long bucket = r.getLong(fields[BUCKET]);
    if (r.isNullAt(lo) || r.isNullAt(hi)) {
      return new Entry(eq, bucket, place, ts, batch, row, true, 0L, -1L, store, probe, tab);
    }
    long from = r.getLong(lo);
    long to = r.getLong(hi);
    return new Entry(eq, bucket, place, ts, batch, row, true, from, to, store, probe, tab);
  }

  /** The rows of {@code in} by partition in {@code parts} partitions: by the hash of their
   * equality key ({@code _sj_key}), or a placed row once in each partition its places ({@code
   * _sj_ss}, {@code _sj_ps}) name, its arrays there cut to that partition's places, so that
   * {@link #byPart} makes there its one copy. (The RDD is lazy while adaptive execution is off,
   * as the batches run: with it on, this would run the shuffle.) */
  static JavaRDD shuffled(Dataset in, int parts) {
    String[] names = in.schema().fieldNames();
    if (!java.util.Arrays.asList(names).contains("_sj_ss")) {
      Dataset by = in.repartition(parts, new Column[] {in.col("_sj_key")});
      return by.queryExecution().toRdd().toJavaRDD();
    }
    String mod = "pmod(p, " + parts + "L)";
    Dataset each =
        in.select(
                new Column[] {
                  functions.col("*"),
                  functions
                      .expr(
                          "explode(array_distinct(transform(array_union(_sj_ss, _sj_ps), p -> "
                              + mod + ")))")
                      .as("_sj_at")
                })
            .withColumn(
                "_sj_hm",
                functions.expr("coalesce(pmod(get(_sj_ss, 0), " + parts + "L) = _sj_at, false)"))
            .withColumn("_sj_ss", functions.expr("filter(_sj_ss, p -> " + mod + " = _sj_at)"))
            .withColumn("_sj_ps", functions.expr("filter(_sj_ps, p -> " + mod + " = _sj_at)"));
    // (Spark's shuffle places a value by its Murmur3 hash: each partition goes by a value that
    // hashes to it.)
    Column[] values = new Column[parts];
    long[] to = hashingTo(parts);
    for (int p = 0; p < parts; p++) {
      values[p] = functions.lit(Long.valueOf(to[p]));
    }
    Column index = each.col("_sj_at").cast("int").plus(Integer.valueOf(1));
    Column shuffle = functions.element_at(functions.array(values), index);
    // (The original columns, and whether the partition is the row's first stored copy's.)
    Column[] columns = new Column[names.length + 1];
    for (int i = 0; i < names.length; i++) {
      columns[i] = each.col(names[i]);
    }
    columns[names.length] = each.col("_sj_hm");
    Dataset by = each.repartition(parts, new Column[] {shuffle}).select(columns);
    return by.queryExecution().toRdd().toJavaRDD();
  }

  /** For each partition p of {@code parts}, a value whose shuffle partition is p. */
  static long[] hashingTo(int parts) {
    long[] to = new long[parts];
    int found = 0;
    boolean[] seen = new boolean[parts];
    for (long v = 0; found < parts; v++) {
      int p = partOf(v, parts);
      if (!seen[p]) {
        seen[p] = true;
        to[p] = v;
        found++;
      }
    }
    return to;
  }

  /** The {@link #fields} of {@code in}'s rows as {@link #shuffled} sends them: a placed row's
   * followed by {@code _sj_hm}. */
  static int[] shuffledFields(StructType in) {
    int[] f = fields(in);
    if (f[STORES] >= 0) {
      f[HOME] = in.size();
    }
    return f;
  }

  /** {@code in}'s rows in one task, without a shuffle: a stage fewer for a small delta. */
  static JavaRDD together(Dataset in) {
    return in.coalesce(1).queryExecution().toRdd().toJavaRDD();
  }

  static int[] fields(StructType s) {
    java.util.List names = java.util.Arrays.asList(s.fieldNames());
    return new int[] {
      ((StructType) s.apply("_sj_l").dataType()).size(),
      ((StructType) s.apply("_sj_r").dataType()).size(),
      names.indexOf("_sj_lo"),
      names.indexOf("_sj_hi"),
      names.indexOf("_sj_bk"),
      names.indexOf("_sj_probe"),
      names.indexOf("_sj_tab"),
      names.indexOf("_sj_ss"),
      names.indexOf("_sj_ps"),
      names.indexOf("_sj_hm")
    };
  }
}
