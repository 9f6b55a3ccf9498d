package streamjoin.operator;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeAndComment;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeFormatter$;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode$;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprValue;
import org.apache.spark.sql.catalyst.expressions.codegen.GeneratedClass;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode$;
import org.apache.spark.sql.types.DataType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A query's condition over its candidate pairs, evaluated a run of candidates at a time over
 * the stored side's columns ({@link SideColumns}): one probing row's values against the
 * stored rows' slots. A nested loop evaluates its condition on every pair its window reaches;
 * one call of Spark's predicate a pair, on a row of two structs, reads each value through its
 * struct. Here the condition is Spark's own code for it (so its semantics are Spark's: NULLs,
 * NaN, casts, overflow), generated as whole-stage code generation does, over local variables
 * instead of a row, inside one generated loop over the candidates' slots: a stored value is an
 * array read.
 *
 * <p>{@link #make} generates one for a condition that reads only columns of the two rows
 * whose values are Java primitives, by deterministic expressions that Spark generates code
 * for, in a loop small enough for the JIT (Spark's huge method limit, as whole-stage code
 * generation has); for any other, the pairs are tested by Spark's predicate ({@link
 * BatchInput#test}). Written for janino: no lambdas, no generics.
 */
public abstract class PairTest {
  /** Per side (0 left, 1 right), the ordinals of the side's columns the condition reads. */
  public int[][] reads;
  /** Per side, those columns' types. */
  public DataType[][] types;

  /** The probing row is a left row: its values, for {@link #keepRight}. */
  public abstract void probeLeft(InternalRow row);

  /** The probing row is a right row: its values, for {@link #keepLeft}. */
  public abstract void probeRight(InternalRow row);

  /** Of the stored right rows at {@code slots[0..n)}, those whose pair with the probing left
   * row meets the condition, into {@code out} in order; how many. {@code cols}: the right
   * side's columns ({@link SideColumns#arrays}). */
  public abstract int keepRight(Object[] cols, int[] slots, int n, int[] out);

  /** {@link #keepRight} of stored left rows with a probing right row. */
  public abstract int keepLeft(Object[] cols, int[] slots, int n, int[] out);

  /** {@link #keepRight} of the stored right rows at slots {@code from} to {@code to - 1}: a
   * run of consecutive slots, read in order without a list of them. */
  public abstract int keepRightRun(Object[] cols, int from, int to, int[] out);

  /** {@link #keepRightRun} of stored left rows with a probing right row. */
  public abstract int keepLeftRun(Object[] cols, int from, int to, int[] out);

  public abstract void initialize(int partition);

  /** The test of {@code condition}, over the pairs' attributes {@code inputs} ({@code _sj_l},
   * {@code _sj_r}, and perhaps {@code _sj_tab}); null where the condition reads anything else
   * (a whole struct, a table), a value of no primitive type, or has an expression without
   * generated code or not deterministic. A condition it takes that then fails to compile is an
   * error, with the generated code's cause. */
  public static PairTest make(Expression condition, scala.collection.immutable.Seq inputs) {
    if (condition == null || !fits(condition)) {
      return null;
    }
    Attribute[] sides = {(Attribute) inputs.apply(0), (Attribute) inputs.apply(1)};
    ArrayList flat = new ArrayList();  // ({side, ordinal, type} per column read)
    Expression bound = flatten(condition, sides, flat);
    if (bound == null) {
      return null;
    }
    int[] counts = new int[2];
    for (int k = 0; k < flat.size(); k++) {
      Object[] c = (Object[]) flat.get(k);
      if (!CodeGenerator$.MODULE$.isPrimitiveType((DataType) c[2])) {
        return null;
      }
      counts[((Integer) c[0]).intValue()]++;
    }
    int[][] reads = {new int[counts[0]], new int[counts[1]]};
    DataType[][] types = {new DataType[counts[0]], new DataType[counts[1]]};
    int[] at = new int[flat.size()];  // (each flat column's index in its side's reads)
    int[] next = new int[2];
    for (int k = 0; k < flat.size(); k++) {
      Object[] c = (Object[]) flat.get(k);
      int side = ((Integer) c[0]).intValue();
      at[k] = next[side]++;
      reads[side][at[k]] = ((Integer) c[1]).intValue();
      types[side][at[k]] = (DataType) c[2];
    }
    PairTest made = compile(bound, flat, at, reads, types);
    if (made == null) {
      return null;
    }
    made.reads = reads;
    made.types = types;
    return made;
  }

  /** Whether every node of {@code e} is deterministic and has generated code of its own. */
  static boolean fits(Expression e) {
    if (e instanceof CodegenFallback || !e.deterministic()) {
      return false;
    }
    List children = CollectionConverters.asJava(e.children());
    for (int i = 0; i < children.size(); i++) {
      if (!fits((Expression) children.get(i))) {
        return false;
      }
    }
    return true;
  }

  /** {@code e} with each field of a side's struct ({@code l.x}) a reference to a flat
   * column, listed in {@code flat} once; null where it reads an attribute otherwise. */
  static Expression flatten(Expression e, Attribute[] sides, ArrayList flat) {
    if (e instanceof GetStructField && ((GetStructField) e).child() instanceof Attribute) {
      GetStructField field = (GetStructField) e;
      Attribute of = (Attribute) field.child();
      int side = of.exprId().equals(sides[0].exprId())
          ? 0
          : of.exprId().equals(sides[1].exprId()) ? 1 : -1;
      if (side < 0) {
        return null;
      }
      int k = 0;
      while (k < flat.size()) {
        Object[] c = (Object[]) flat.get(k);
        if (((Integer) c[0]).intValue() == side && ((Integer) c[1]).intValue() == field.ordinal()) {
          break;
        }
        k++;
      }
      if (k == flat.size()) {
        flat.add(new Object[] {Integer.valueOf(side), Integer.valueOf(field.ordinal()),
            field.dataType()});
      }
      return new BoundReference(k, field.dataType(), field.nullable());
    }
    if (e instanceof Attribute) {
      return null;
    }
    List children = CollectionConverters.asJava(e.children());
    if (children.isEmpty()) {
      return e;
    }
    ArrayList made = new ArrayList();
    for (int i = 0; i < children.size(); i++) {
      Expression c = flatten((Expression) children.get(i), sides, flat);
      if (c == null) {
        return null;
      }
      made.add(c);
    }
    return (Expression) e.withNewChildren(CollectionConverters.asScala(made).toList());
  }

  /** The generated subclass for {@code bound} (over the flat columns {@code flat}, each at
   * {@code at} in its side's {@code reads}): per direction, the probing side's values in
   * fields, the stored side's read from its arrays in the loop; null where a loop is over
   * Spark's huge method limit. */
  static PairTest compile(
      Expression bound, ArrayList flat, int[] at, int[][] reads, DataType[][] types) {
    CodegenContext ctx = new CodegenContext();
    StringBuilder fields = new StringBuilder();
    StringBuilder[] probes = {new StringBuilder(), new StringBuilder()};
    for (int k = 0; k < flat.size(); k++) {
      Object[] c = (Object[]) flat.get(k);
      DataType type = (DataType) c[2];
      String java = CodeGenerator$.MODULE$.javaType(type);
      int side = ((Integer) c[0]).intValue();
      fields.append("private boolean pn").append(k).append(";\n");
      fields.append("private ").append(java).append(" pv").append(k).append(";\n");
      probes[side].append("pn").append(k).append(" = row.isNullAt(").append(c[1]).append(");\n");
      probes[side].append("pv").append(k).append(" = pn").append(k).append(" ? ")
          .append(CodeGenerator$.MODULE$.defaultValue(type, false)).append(" : ")
          .append(CodeGenerator$.MODULE$.getValue("row", type, String.valueOf(c[1])))
          .append(";\n");
    }
    String[] loops = new String[2];
    String[] runs = new String[2];
    for (int stored = 0; stored < 2; stored++) {
      StringBuilder arrays = new StringBuilder();
      StringBuilder reads1 = new StringBuilder();
      ArrayList vars = new ArrayList();
      for (int k = 0; k < flat.size(); k++) {
        Object[] c = (Object[]) flat.get(k);
        DataType type = (DataType) c[2];
        String java = CodeGenerator$.MODULE$.javaType(type);
        if (((Integer) c[0]).intValue() != stored) {
          vars.add(ExprCode$.MODULE$.apply(
              (ExprValue) JavaCode$.MODULE$.isNullVariable("pn" + k),
              (ExprValue) JavaCode$.MODULE$.variable("pv" + k, type)));
          continue;
        }
        int i = at[k];
        arrays.append(java).append("[] c").append(k).append(" = (").append(java)
            .append("[]) cols[").append(2 * i).append("];\n");
        arrays.append("boolean[] z").append(k).append(" = (boolean[]) cols[")
            .append(2 * i + 1).append("];\n");
        reads1.append("boolean sn").append(k).append(" = z").append(k).append(" != null && z")
            .append(k).append("[j];\n");
        reads1.append(java).append(" sv").append(k).append(" = c").append(k).append("[j];\n");
        vars.add(ExprCode$.MODULE$.apply(
            (ExprValue) JavaCode$.MODULE$.isNullVariable("sn" + k),
            (ExprValue) JavaCode$.MODULE$.variable("sv" + k, type)));
      }
      ctx.currentVars_$eq(CollectionConverters.asScala(vars).toList());
      ctx.INPUT_ROW_$eq(null);
      ExprCode ev = bound.genCode(ctx);
      String test = reads1.toString() + ev.code() + "\nif (!" + ev.isNull() + " && " + ev.value()
          + ") {\nout[m++] = j;\n}\n}\nreturn m;\n";
      loops[stored] =
          arrays + "int m = 0;\nfor (int i = 0; i < n; i++) {\nint j = slots[i];\n" + test;
      runs[stored] = arrays + "int m = 0;\nfor (int j = from; j < to; j++) {\n" + test;
    }
    String body = "public Object generate(Object[] references) {\n"
        + "return new SpecificPairTest(references);\n}\n"
        + "class SpecificPairTest extends " + PairTest.class.getName() + " {\n"
        + "private final Object[] references;\n" + ctx.declareMutableStates() + "\n" + fields
        + "public SpecificPairTest(Object[] references) {\nthis.references = references;\n"
        + ctx.initMutableStates() + "\n}\n"
        + "public void initialize(int partitionIndex) {\n" + ctx.initPartition() + "\n}\n"
        + "public void probeLeft(InternalRow row) {\n" + probes[0] + "}\n"
        + "public void probeRight(InternalRow row) {\n" + probes[1] + "}\n"
        + "public int keepLeft(Object[] cols, int[] slots, int n, int[] out) {\n" + loops[0]
        + "}\n"
        + "public int keepRight(Object[] cols, int[] slots, int n, int[] out) {\n" + loops[1]
        + "}\n"
        + "public int keepLeftRun(Object[] cols, int from, int to, int[] out) {\n" + runs[0]
        + "}\n"
        + "public int keepRightRun(Object[] cols, int from, int to, int[] out) {\n" + runs[1]
        + "}\n" + ctx.declareAddedFunctions() + "\n}\n";
    CodeAndComment code = CodeFormatter$.MODULE$.stripOverlappingComments(
        new CodeAndComment(body, ctx.getPlaceHolderToComments()));
    scala.Tuple2 compiled = CodeGenerator$.MODULE$.compile(code);
    int limit = org.apache.spark.sql.internal.SQLConf.get().hugeMethodLimit();
    if (((org.apache.spark.sql.catalyst.expressions.codegen.ByteCodeStats) compiled._2())
        .maxMethodCodeSize() > limit) {
      return null;  // (a method the JIT would never compile: Spark's predicate is faster)
    }
    GeneratedClass clazz = (GeneratedClass) compiled._1();
    Object[] references =
        (Object[]) ctx.references().toArray(scala.reflect.ClassTag$.MODULE$.Object());
    PairTest made = (PairTest) clazz.generate(references);
    made.initialize(0);
    return made;
  }
}
