package streamjoin.operator;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.BooleanType$;
import org.apache.spark.sql.types.ByteType$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType$;
import org.apache.spark.sql.types.FloatType$;
import org.apache.spark.sql.types.ShortType$;

/**
 * Columns of one {@link IndexSide}'s rows that a {@link PairTest} reads, as arrays by slot
 * beside the side's own (a value and whether it is NULL each): a nested loop reads a stored
 * value from an array instead of through its row's struct. Made from the live rows when a
 * probe first asks for them ({@link #of}), then kept as rows are added and moved
 * as the side's slots are. A spilled row's values stay here, counted with its slot in the
 * partition's memory budget (`IndexPart#fit`): a few bytes a column a row. Written for janino:
 * no lambdas, no generics.
 */
final class SideColumns {
  static final int BOOLEAN = 0;
  static final int BYTE = 1;
  static final int SHORT = 2;
  static final int INT = 3;  // (int, date, a year-month interval)
  static final int LONG = 4;  // (long, timestamp, a day-time interval)
  static final int FLOAT = 5;
  static final int DOUBLE = 6;

  final int[] ordinals;
  final int[] kinds;
  final DataType[] types;
  /** Per column, its values then its NULL marks (a boolean[]): what {@link PairTest} reads. */
  Object[] arrays;

  SideColumns(int[] ordinals, DataType[] types, int capacity) {
    this.ordinals = ordinals;
    this.types = types;
    kinds = new int[ordinals.length];
    arrays = new Object[2 * ordinals.length];
    for (int k = 0; k < ordinals.length; k++) {
      kinds[k] = kind(types[k]);
      arrays[2 * k] = array(kinds[k], capacity);
      arrays[2 * k + 1] = new boolean[capacity];
    }
  }

  /** The columns {@code ordinals} (of types {@code types}) of {@code side}'s rows, made from
   * its live rows where it does not keep them yet. */
  static SideColumns of(IndexSide side, int[] ordinals, DataType[] types) {
    SideColumns kept = side.columns;
    if (kept == null || !kept.holds(ordinals, types)) {
      kept = new SideColumns(ordinals, types, side.keys.length);
      for (int i = side.start; i < side.end; i++) {
        kept.set(i, side.row(i));
      }
      side.columns = kept;
    }
    return kept;
  }

  /** Whether these are the columns {@code ordinals} of types {@code types}. */
  boolean holds(int[] ordinals, DataType[] types) {
    return java.util.Arrays.equals(this.ordinals, ordinals)
        && java.util.Arrays.equals(this.types, types);
  }

  static int kind(DataType type) {
    if (type == BooleanType$.MODULE$) {
      return BOOLEAN;
    } else if (type == ByteType$.MODULE$) {
      return BYTE;
    } else if (type == ShortType$.MODULE$) {
      return SHORT;
    } else if (type == FloatType$.MODULE$) {
      return FLOAT;
    } else if (type == DoubleType$.MODULE$) {
      return DOUBLE;
    }
    String java = org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$.MODULE$
        .javaType(type);
    if (java.equals("long")) {
      return LONG;
    } else if (java.equals("int")) {
      return INT;
    }
    throw new IllegalArgumentException("streamjoin: no column array for type " + type);
  }

  static Object array(int kind, int n) {
    switch (kind) {
      case BOOLEAN: return new boolean[n];
      case BYTE: return new byte[n];
      case SHORT: return new short[n];
      case INT: return new int[n];
      case LONG: return new long[n];
      case FLOAT: return new float[n];
      default: return new double[n];
    }
  }

  /** Slot {@code i} holds {@code row}'s values. */
  void set(int i, InternalRow row) {
    if (ordinals.length == 0) {  // (a condition that reads nothing of this side)
      return;
    }
    if (i >= ((boolean[]) arrays[1]).length) {
      resize(Math.max(2 * i, 16), 0, i);
    }
    for (int k = 0; k < ordinals.length; k++) {
      int o = ordinals[k];
      boolean none = row.isNullAt(o);
      ((boolean[]) arrays[2 * k + 1])[i] = none;
      if (none) {
        continue;
      }
      Object a = arrays[2 * k];
      switch (kinds[k]) {
        case BOOLEAN: ((boolean[]) a)[i] = row.getBoolean(o); break;
        case BYTE: ((byte[]) a)[i] = row.getByte(o); break;
        case SHORT: ((short[]) a)[i] = row.getShort(o); break;
        case INT: ((int[]) a)[i] = row.getInt(o); break;
        case LONG: ((long[]) a)[i] = row.getLong(o); break;
        case FLOAT: ((float[]) a)[i] = row.getFloat(o); break;
        default: ((double[]) a)[i] = row.getDouble(o); break;
      }
    }
  }

  /** The heap its arrays take: each column's values and its NULL flags. */
  long bytes() {
    if (ordinals.length == 0) {
      return 0L;
    }
    long perSlot = 0;
    for (int k = 0; k < kinds.length; k++) {
      perSlot += 1 + width(kinds[k]);
    }
    return perSlot * ((boolean[]) arrays[1]).length;
  }

  /** The bytes of one value of an array of {@code kind}. */
  static int width(int kind) {
    switch (kind) {
      case BOOLEAN: return 1;
      case BYTE: return 1;
      case SHORT: return 2;
      case INT: return 4;
      case FLOAT: return 4;
      default: return 8;
    }
  }

  /** The side's slots were moved: the {@code live} rows from slot {@code from} now start at
   * 0, in arrays of {@code capacity} (its reclaim). */
  void resize(int capacity, int from, int live) {
    for (int a = 0; a < arrays.length; a++) {
      Object moved = a % 2 == 1 ? new boolean[capacity] : array(kinds[a / 2], capacity);
      System.arraycopy(arrays[a], from, moved, 0, live);
      arrays[a] = moved;
    }
  }
}
