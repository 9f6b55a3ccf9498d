package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * The live state of two-way equi and band joins as hash indexes in the executor's memory, kept
 * across micro-batches: one per query and shuffle partition (a band join's: one), each side's
 * rows by the hash of their key (a band join's: by their value's bucket), and in arrival order
 * for expiry. A batch's delta is shuffled by the same hash (or, when
 * small, put in one task); each task probes and extends the partitions it has rows of (the delta
 * rule: new left rows meet old and new right rows, new right rows meet old left rows) and
 * returns the candidate pairs, which the query's whole predicate then filters in Spark SQL. The
 * probe can also count the delta's rows per unit of the skew check ({@link #unitCounts}). Rows stay in Spark's internal form (the
 * shuffle's rows, copied): no conversion to and from external rows, which cost a generated
 * (de)serializer per batch and two conversions per row.
 *
 * <p>Input rows: {@code _sj_side} (0 left, 1 right), {@code _sj_key} (a 64-bit hash of the key
 * values; NULL: a NULL key, which meets nothing), {@code _sj_ts} (event time in microseconds, or
 * NULL), {@code _sj_l} and {@code _sj_r} (the row, as a struct on its side's column). A row's
 * partition is computed from its key as Spark's shuffle computed it, never taken from the task:
 * operators after the probe (a union of several queries' pairs, the sink's coalesce) number
 * their tasks otherwise. Each partition records the last batch applied to it: a batch run again
 * (a retried task, a batch rerun after a failure) first takes back the rows it added. Written
 * for Spark's own Java compiler (janino): no lambdas, raw collections.
 */
public final class JoinIndex {
  private JoinIndex() {}

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
    // (MARKS), and whether this copy is one that never decides: all but the first stored.)
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

  /** Per index name, the identities ({@link #rowId}) of the rows with several copies that a
   * partner matched (an outer join's under a scheme, time buckets, a band's runs or an OR's
   * tables): a copy's match marks them all, and the row's first stored copy decides it (the
   * others are {@code copy}). One JVM holds every partition (the driver's, in local mode), so
   * each copy's probe reads them, in one task or several. Equal rows of a side share an
   * identity, and their matches: they meet the same partners. */
  static final ConcurrentHashMap MARKS = new ConcurrentHashMap();

  /** Whether an outer join's rows ({@code marker} not null) of an input whose {@code fields}
   * are given have several copies, which share their marks: placed rows, or an OR's tables. */
  static boolean sharesMarks(BatchInput marker, int[] fields) {
    return marker != null && (fields[STORES] >= 0 || fields[TAB] >= 0);
  }

  /** The shared marks of index {@code name}, made where {@code make} and there are none. */
  static java.util.Set marks(String name, boolean make) {
    java.util.Set had = (java.util.Set) MARKS.get(name);
    if (had != null || !make) {
      return had;
    }
    java.util.Set made = ConcurrentHashMap.newKeySet();
    had = (java.util.Set) MARKS.putIfAbsent(name, made);
    return had == null ? made : had;
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

  /** Both sides of one partition, at the version of the last batch applied: one pair of
   * sides a table (an OR of equalities has a table for each of its keys). */
  static final class Part {
    IndexSide[][] tables = new IndexSide[][] {{new IndexSide(), new IndexSide()}};
    long version;

    Part(long version) {
      this.version = version;
    }

    /** Side {@code side} of table {@code tab}, made where it is not yet. */
    IndexSide side(int tab, int side) {
      if (tab >= tables.length) {
        IndexSide[][] more = new IndexSide[tab + 1][];
        System.arraycopy(tables, 0, more, 0, tables.length);
        for (int t = tables.length; t <= tab; t++) {
          more[t] = new IndexSide[] {new IndexSide(), new IndexSide()};
        }
        tables = more;
      }
      return tables[tab][side];
    }

    /** Each side's rows below {@code left} and {@code right} count as decided (a rebuild's:
     * the committed watermark decided them). */
    void decidedBefore(long left, long right) {
      for (int t = 0; t < tables.length; t++) {
        tables[t][0].decidedBefore(left);
        tables[t][1].decidedBefore(right);
      }
    }

    /** Adds the entries of {@code entries} (of side {@code side}) that are stored. */
    void addStored(ArrayList entries, int side) {
      for (int i = 0; i < entries.size(); i++) {
        Entry e = (Entry) entries.get(i);
        if (e.store) {
          side(e.tab, side).add(e);
        }
      }
    }

    /** The matches the probe found for the stored entries of {@code entries} (of side {@code
     * side}, the batch's newest rows of their tables), marked in their slots. */
    void syncMatched(ArrayList entries, int side) {
      int[] next = new int[tables.length];
      for (int i = 0; i < entries.size(); i++) {
        Entry e = (Entry) entries.get(i);
        if (e.store) {
          next[e.tab]++;
        }
      }
      for (int t = 0; t < tables.length; t++) {
        next[t] = tables[t][side].end - next[t];
      }
      for (int i = 0; i < entries.size(); i++) {
        Entry e = (Entry) entries.get(i);
        if (e.store) {
          int slot = next[e.tab]++;
          if (e.matched) {
            tables[e.tab][side].matched[slot] = true;
          }
        }
      }
    }

    void expire(long leftLeast, long rightLeast, java.util.Set marks) {
      for (int t = 0; t < tables.length; t++) {
        tables[t][0].expire(leftLeast, marks);
        tables[t][1].expire(rightLeast, marks);
      }
    }

    void undo(long batch) {
      for (int t = 0; t < tables.length; t++) {
        tables[t][0].undo(batch);
        tables[t][1].undo(batch);
      }
    }

    long size() {
      long n = 0;
      for (int t = 0; t < tables.length; t++) {
        n += tables[t][0].size() + tables[t][1].size();
      }
      return n;
    }
  }

  static final ConcurrentHashMap PARTS = new ConcurrentHashMap();

  static Part part(String name, int p) {
    Part part = (Part) PARTS.get(name + "/" + p);
    if (part == null) {
      throw new IllegalStateException("streamjoin: no index for " + name + " partition " + p);
    }
    return part;
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
   * {@code shared} (an outer join's marks shared by a row's copies: {@link #sharesMarks}),
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

  /** Drops, in every partition of {@code name}, the rows below {@code leftLeast} (left) and
   * {@code rightLeast} (right): no row of the batch about to run can meet them. */
  public static void expire(String name, int parts, long leftLeast, long rightLeast) {
    java.util.Set marks = marks(name, false);
    for (int p = 0; p < parts; p++) {
      Part part = part(name, p);
      synchronized (part) {
        part.expire(leftLeast, rightLeast, marks);
      }
    }
  }

  /** Empty indexes for {@code name} in {@code parts} partitions, at batch {@code version}. */
  public static void reset(String name, int parts, long version) {
    drop(name);
    for (int p = 0; p < parts; p++) {
      PARTS.put(name + "/" + p, new Part(version));
    }
  }

  /** Forgets every partition of {@code name}, and its counts not read. */
  public static void drop(String name) {
    MARKS.remove(name);
    Iterator it = PARTS.keySet().iterator();
    while (it.hasNext()) {
      String key = (String) it.next();
      if (key.startsWith(name + "/")) {
        it.remove();
      }
    }
    Iterator counted = COUNTS.keySet().iterator();
    while (counted.hasNext()) {
      if (((String) counted.next()).startsWith(name + "@")) {
        counted.remove();
      }
    }
  }

  /** Rows each partition of {@code name} holds, both sides, comma-separated (one string for
   * one call from Python); 0 for a partition it does not have. */
  public static String sizes(String name, int parts) {
    StringBuilder text = new StringBuilder();
    for (int p = 0; p < parts; p++) {
      Part part = (Part) PARTS.get(name + "/" + p);
      long n = 0;
      if (part != null) {
        synchronized (part) {
          n = part.size();
        }
      }
      text.append(p == 0 ? "" : ",").append(n);
    }
    return text.toString();
  }

  /** Rows held by the partitions of {@code name}, both sides. */
  public static long rows(String name) {
    long n = 0;
    Iterator it = PARTS.entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      if (((String) e.getKey()).startsWith(name + "/")) {
        Part part = (Part) e.getValue();
        n += part.size();
      }
    }
    return n;
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
    return new Entry(eq, bucket, place, ts, batch, row, true, from, r.getLong(hi), store, probe, tab);
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

  /** Loads committed rows into the (reset) indexes of {@code name}: one Spark job. With an
   * outer join's {@code marker} (else null), the rows loaded are applied as one batch, so that
   * the pairs among them mark their rows matched, and each side's rows below {@code
   * leftDecided} and {@code rightDecided} are decided already. */
  public static void load(
      Dataset in, String name, int parts, BatchInput marker, long leftDecided, long rightDecided) {
    Load f = new Load(name, parts, shuffledFields(in.schema()));
    f.marker = marker;
    f.decided = new long[] {leftDecided, rightDecided};
    shuffled(in, parts).foreachPartition(f);
    if (marker != null) {
      for (int p = 0; p < parts; p++) {
        Part part = part(name, p);
        synchronized (part) {
          part.decidedBefore(leftDecided, rightDecided);
        }
      }
    }
  }

  /** The rows of side {@code side} of {@code name}'s partitions below event time {@code
   * below} that no partner matched, decided by batch {@code batch} (a rerun of it decides the
   * same ones), as pairs ({@code in}'s pairs, the other side NULL): an outer join's rows
   * without a partner. For a driver whose JVM holds the partitions (a local master). */
  public static Dataset decide(
      Dataset in, String name, int parts, int side, long below, long batch) {
    boolean tabbed = java.util.Arrays.asList(in.schema().fieldNames()).contains("_sj_tab");
    ArrayList rows = alone(name, parts, side, below, batch, tabbed);
    SparkSession spark = (SparkSession) in.sparkSession();
    org.apache.spark.rdd.RDD rdd =
        spark
            .sparkContext()
            .parallelize(
                scala.jdk.javaapi.CollectionConverters.asScala(rows).toSeq(),
                1,
                scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(rdd, pairsSchema(in.schema()), false);
  }

  /** What {@link #decide} decides, as a list of pairs (in the JVM that holds the partitions);
   * {@code tabbed}: with the table each was decided in, as an OR's pairs have it. */
  static ArrayList alone(
      String name, int parts, int side, long below, long batch, boolean tabbed) {
    ArrayList rows = new ArrayList();
    java.util.Set marks = marks(name, false);
    for (int p = 0; p < parts; p++) {
      Part part = part(name, p);
      synchronized (part) {
        aloneIn(part, side, below, batch, marks, tabbed, rows);
      }
    }
    return rows;
  }

  /** {@link #alone} of one partition {@code part}, added to {@code rows}. */
  static void aloneIn(
      Part part, int side, long below, long batch, java.util.Set marks, boolean tabbed,
      ArrayList rows) {
    for (int t = 0; t < part.tables.length; t++) {
      ArrayList alone = part.tables[t][side].decide(below, batch, marks);
      for (int i = 0; i < alone.size(); i++) {
        Object[] pair = new Object[tabbed ? 3 : 2];  // (the other side NULL)
        pair[side] = alone.get(i);
        if (tabbed) {
          pair[2] = Integer.valueOf(t);
        }
        rows.add(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(pair));
      }
    }
  }

  /** The candidate pairs of batch {@code batch}'s delta {@code in} (lazy: the job that reads
   * them applies the batch to the partitions it has rows of), or with {@code output} (else
   * null) the query's rows of those it keeps, made in the probe's tasks. {@code units} above 0: count
   * the delta's rows per unit of the skew check ({@link #unitCounts}). {@code oneTask}: one
   * task applies every partition's rows, with no shuffle (a partition's rows of a batch must
   * all be in one task: a second would take back the first's as a rerun's). */
  public static Dataset probe(
      Dataset in,
      BatchInput output,
      BatchInput marker,
      String shed,
      String name,
      int parts,
      long batch,
      int units,
      boolean oneTask) {
    JavaRDD rows = oneTask ? together(in) : shuffled(in, parts);
    SparkSession spark = (SparkSession) in.sparkSession();
    int[] fields = oneTask ? fields(in.schema()) : shuffledFields(in.schema());
    IndexProbe f = probing(fields, output, shed, name, parts, batch, units);
    f.marker = marker;
    return made(spark, rows, f, output == null ? pairsSchema(in.schema()) : output.layout);
  }

  /** The candidate pairs of a probe whose input is {@code in}'s layout, none of them: what a
   * query's {@link BatchInput#output} is planned over. */
  public static Dataset nopairs(Dataset in) {
    SparkSession spark = (SparkSession) in.sparkSession();
    org.apache.spark.rdd.RDD none =
        spark.sparkContext().emptyRDD(scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, pairsSchema(in.schema()), false);
  }

  /** {@link #probe} of a micro-batch's own rows {@code rows} made into the probe's input by
   * {@code input}, in one task, leaving out rows behind {@code lateBefore}; with {@code
   * output} (else null), the pairs it keeps, made into its rows in the task; with {@code
   * marker} (else null), an outer join's ON condition, which marks the rows it matches; with
   * {@code alone} (else null; then {@code output} is not), its rows without a partner, made of
   * the rows of each preserved side below {@code leftBelow} and {@code rightBelow} (the least
   * long: none) that no partner matched, decided in the task once its probe has marked them
   * (a rerun of the batch decides the same; {@link #decide}). */
  public static Dataset probeBatch(
      BatchInput input,
      BatchInput output,
      BatchInput marker,
      BatchInput alone,
      long leftBelow,
      long rightBelow,
      Dataset rows,
      long lateBefore,
      String shed,
      String name,
      int parts,
      long batch,
      int units) {
    SparkSession spark = (SparkSession) rows.sparkSession();
    JavaRDD in = input.rows(rows, lateBefore);
    IndexProbe f = probing(fields(input.layout), output, shed, name, parts, batch, units);
    f.marker = marker;
    f.alone = alone;
    f.below = new long[] {leftBelow, rightBelow};
    return made(spark, in, f, output == null ? pairsSchema(input.layout) : output.layout);
  }

  /** The probe of batch {@code batch} of an input whose {@code fields} are given. {@code
   * shed}: empty, or shedding's cuts of the left and the right side and whether the pairs of
   * the rows that skip their probe are counted ({@code "cutL,cutR,count"}; {@link
   * IndexProbe#cuts}), whose counts follow the units' in {@link #unitCounts}. */
  static IndexProbe probing(
      int[] fields, BatchInput output, String shed, String name, int parts, long batch, int units) {
    COUNTS.remove(name + "@" + batch);  // (an earlier attempt's, if the batch runs again)
    IndexProbe f = new IndexProbe(name, parts, batch, fields, units, output);
    if (shed != null && !shed.isEmpty()) {
      String[] given = shed.split(",");
      f.cuts = new long[] {Long.parseLong(given[0]), Long.parseLong(given[1])};
      f.countMissed = "count".equals(given[2]);
    }
    return f;
  }

  /** The rows probe {@code f} makes of {@code rows}, of columns {@code out}. */
  static Dataset made(SparkSession spark, JavaRDD rows, IndexProbe f, StructType out) {
    return spark.internalCreateDataFrame(PlainRdd.mapPartitions(rows, f).rdd(), out, false);
  }

  /** The candidate pairs' columns of a probe whose input has columns {@code s}. */
  static StructType pairsSchema(StructType s) {
    StructField l = nullable(s, "_sj_l");
    StructField r = nullable(s, "_sj_r");
    if (!java.util.Arrays.asList(s.fieldNames()).contains("_sj_tab")) {
      return new StructType(new StructField[] {l, r});
    }
    // (An OR of equalities: the table a pair was found in, which decides whether it is kept.)
    StructField tab = new StructField("_sj_tab", DataTypes.IntegerType, false, Metadata.empty());
    return new StructType(new StructField[] {l, r, tab});
  }

  static StructField nullable(StructType s, String name) {
    StructField f = s.apply(name);
    return new StructField(name, f.dataType(), true, f.metadata());
  }

  /** Per probe {@code name + "@" + batch}: each task's rows per unit, by a partition it read
   * (a task or stage run again replaces its counts). */
  static final ConcurrentHashMap COUNTS = new ConcurrentHashMap();

  /** The delta's rows per unit that the probe of batch {@code batch} of {@code name} counted
   * (both sides; zeros where it counted none), forgotten once read; comma-separated, one string
   * for one call from Python (an array's values are a call each). */
  public static String unitCounts(String name, long batch, int units) {
    long[] total = new long[units];
    ConcurrentHashMap tasks = (ConcurrentHashMap) COUNTS.remove(name + "@" + batch);
    if (tasks != null) {
      Iterator it = tasks.values().iterator();
      while (it.hasNext()) {
        long[] c = (long[]) it.next();
        for (int u = 0; u < units && u < c.length; u++) {
          total[u] += c[u];
        }
      }
    }
    Iterator keys = COUNTS.keySet().iterator();
    while (keys.hasNext()) {  // (a failed batch's counts, never read)
      if (((String) keys.next()).startsWith(name + "@")) {
        keys.remove();
      }
    }
    StringBuilder text = new StringBuilder();
    for (int u = 0; u < units; u++) {
      text.append(u == 0 ? "" : ",").append(total[u]);
    }
    return text.toString();
  }

  static final class Load implements VoidFunction {
    final String name;
    final int parts;
    final int[] fields;
    BatchInput marker;
    long[] decided;

    Load(String name, int parts, int[] fields) {
      this.name = name;
      this.parts = parts;
      this.fields = fields;
    }

    public void call(Object rows) {
      boolean shared = sharesMarks(marker, fields);
      HashMap found = byPart((Iterator) rows, parts, Long.MIN_VALUE, fields, null, 0, shared);
      Iterator it = found.entrySet().iterator();
      while (it.hasNext()) {
        java.util.Map.Entry e = (java.util.Map.Entry) it.next();
        Part part = part(name, ((Integer) e.getKey()).intValue());
        ArrayList[] sides = (ArrayList[]) e.getValue();
        synchronized (part) {
          loadInto(part, sides, name, parts, fields, marker, shared);
        }
      }
    }
  }

  /** Adds a partition's committed rows {@code sides} (per side) to {@code part}; with an outer
   * join's {@code marker} (else null), applied as one batch before any, so that the pairs among
   * them mark their rows matched ({@code shared}: in the index's shared marks). */
  static void loadInto(
      Part part, ArrayList[] sides, String name, int parts, int[] fields, BatchInput marker,
      boolean shared) {
    if (marker == null) {
      for (int side = 0; side < 2; side++) {
        part.addStored(sides[side], side);
      }
      return;
    }
    // (As one batch before any: the pairs among the rows mark them; none is kept.)
    IndexProbe probe = new IndexProbe(name, parts, Long.MIN_VALUE + 1, fields, 0, null);
    probe.marker = marker;
    probe.marks = shared ? marks(name, true) : null;
    long version = part.version;
    part.version = Long.MIN_VALUE;  // (before the probe's batch: nothing taken back)
    probe.apply(part, sides, new ArrayList());
    part.version = version;
  }
}
