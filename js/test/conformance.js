// The JS half of the conformance test: checks every result of the package
// against the vectors the Go side made (conformance_test.go), and lists
// each vector whose result differs, by name, instead of stopping at the
// first.
import { checkLayout, compareIDs, decodeID, firstID, IDError, isSnowflake, lastID, LayoutError, layoutFromServer, maxID, minID,
  parseID, parseJSON, sortIDs, timeBits } from "../dist/index.js";

// attempt runs f and returns its result, or the error it threw as
// {error: kind-or-name}.
function attempt(f) {
  try {
    return f();
  } catch (e) {
    if (e instanceof IDError) return { error: e.kind };
    if (e instanceof LayoutError) return { error: "layout:" + e.field };
    return { error: String(e) };
  }
}

// canonical writes a value as JSON with object keys sorted and bigints
// marked, so that two values compare by content alone.
function canonical(v) {
  return JSON.stringify(v, (_, x) => {
    if (typeof x === "bigint") return x.toString() + "n";
    if (x && typeof x === "object" && !Array.isArray(x)) return Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)));
    return x;
  });
}

function same(a, b) {
  return canonical(a) === canonical(b);
}

// check returns {checked: {group: count}, mismatches: [{name, want, got}]}.
export function check(vectors) {
  const checked = {}, mismatches = [];
  const expect = (group, name, want, got) => {
    checked[group] = (checked[group] ?? 0) + 1;
    if (!same(want, got)) mismatches.push({ name, want, got });
  };

  for (const v of vectors.layouts) {
    const g = "layout " + v.name;
    const l = v.layout;
    if (v.jsRefuses) {
      expect(g, `${v.name}: refused`, { error: "layout:timeBits" }, attempt(() => checkLayout(l)));
      continue;
    }
    expect(g, `${v.name}: checkLayout`, l, attempt(() => ({ ...checkLayout(l) })));
    expect(g, `${v.name}: timeBits`, v.timeBits, timeBits(l));
    expect(g, `${v.name}: layoutFromServer`, l, attempt(() => ({ ...layoutFromServer(v.server) })));
    for (const [i, d] of v.decode.entries()) {
      const got = attempt(() => {
        const p = decodeID(d.id, l), q = decodeID(BigInt(d.id), l);
        if (p.time.getTime() !== p.timestamp || !same(p, q)) return { error: "text and bigint disagree" };
        return { id: d.id, timestamp: p.timestamp, worker: p.worker, sequence: p.sequence };
      });
      expect(g, `${v.name}: decode[${i}] ${d.id}`, d, got);
    }
    for (const [i, t] of v.times.entries()) {
      const got = attempt(() => {
        const r = { timestamp: t.timestamp, first: firstID(t.timestamp, l), last: lastID(t.timestamp, l) };
        const asDate = new Date(t.timestamp);
        if (firstID(asDate, l) !== r.first || lastID(asDate, l) !== r.last) return { error: "number and Date disagree" };
        return r;
      });
      expect(g, `${v.name}: times[${i}] ${t.timestamp}`, t, got);
    }
  }

  for (const [i, p] of vectors.parse.entries()) {
    const got = attempt(() => {
      const s = parseID(p.input).toString();
      return isSnowflake(p.input) ? { id: s } : { error: "isSnowflake refused it" };
    });
    const want = p.error ? { error: p.error } : { id: p.id };
    if (p.error && isSnowflake(p.input)) mismatches.push({ name: `parse[${i}]: isSnowflake`, want: false, got: true });
    expect("parse", `parse[${i}] ${JSON.stringify(p.input)}`, want, got);
  }

  for (const [i, c] of vectors.compare.entries()) {
    expect("compare", `compare[${i}] ${c.a} ${c.b}`, c.cmp, attempt(() => compareIDs(c.a, c.b)));
  }

  for (const [i, s] of vectors.sort.entries()) {
    const got = attempt(() => ({
      sorted: sortIDs(s.ids),
      desc: sortIDs(s.ids, "desc"),
      min: minID(s.ids),
      max: maxID(s.ids),
      byCompare: [...s.ids].sort(compareIDs),
    }));
    const want = { sorted: s.sorted, desc: [...s.sorted].reverse(), min: s.sorted[0], max: s.sorted.at(-1), byCompare: s.sorted };
    expect("sort", `sort[${i}]`, want, got);
  }

  for (const [i, j] of vectors.json.entries()) {
    expect("json", `json[${i}] ${j.text}`, j.want, attempt(() => parseJSON(j.text)));
  }
  return { checked, mismatches };
}
