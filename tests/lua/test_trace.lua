-- Traces: load, info, gen, import, select, split, rows and counts, save.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
T.eq(tostring(t), "Trace<449 req, L=24 E=32 k=4>", "trace tostring")
T.eq(#t, 449, "trace #")
local L, E, k = t:geometry()
T.ok(L == 24 and E == 32 and k == 4, "trace geometry")
local info = eldr.info(t)
T.ok(info.valid and info.n == 449 and #info.labels >= 2, "info of a trace")
local shares = 0
for _, l in ipairs(info.labels) do shares = shares + l.share end
T.near(shares, 1, 1e-12, "label shares sum to 1")
local pinfo = eldr.info(T.data)
T.ok(pinfo.valid and pinfo.n == 449 and pinfo.path == T.data, "info of a path")

-- conservation, checked row by row in Lua (an independent oracle)
local bad = 0
for r = 1, #t, 37 do
  local row = t:row(r)
  for l = 0, L - 1 do
    local s = 0
    for _, c in ipairs(t:counts(r, l)) do s = s + c end
    if s ~= row.prompt_tokens * k then bad = bad + 1 end
    local d = 0
    for _, c in ipairs(t:counts(r, l, "decode")) do d = d + c end
    if d ~= row.decode_tokens * k then bad = bad + 1 end
  end
end
T.eq(bad, 0, "counts conserve tokens * k in every layer")

-- row range load equals select of those rows
local part = eldr.load(T.data, {rows = {11, 20}})
local sel = t:select({11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
T.ok(#part == 10 and part:row(1).id == t:row(11).id and sel:row(10).id == t:row(20).id,
     "load rows range == select")
local same = true
for l = 0, L - 1 do
  local a, b = part:counts(3, l), t:counts(13, l)
  for e = 1, E do same = same and a[e] == b[e] end
end
T.ok(same, "range load keeps counts")

-- select by label and by predicate
local name = info.labels[1].name
local by_label = t:select({label = name})
T.eq(#by_label, info.labels[1].count, "select by label")
local long = t:select(function(row) return row.prompt_tokens >= 32 and row.decode_tokens > 100 end)
local want = 0
for r = 1, #t do if t:row(r).decode_tokens > 100 then want = want + 1 end end
T.eq(#long, want, "select by predicate")

-- splits: partition of the rows, deterministic for a seed
local function ids(tr)
  local s = {}
  for r = 1, #tr do s[tr:row(r).id] = true end
  return s
end
local c1, e1 = t:split{count = 100}
T.ok(#c1 == 100 and #e1 == 349 and c1:row(100).id == t:row(100).id, "split by count")
local c2, e2 = t:split{fraction = 0.3, seed = 7}
local c3 = t:split{fraction = 0.3, seed = 7}
local c4 = t:split{fraction = 0.3, seed = 8}
local a, b, overlap = ids(c2), ids(e2), 0
for id in pairs(a) do if b[id] then overlap = overlap + 1 end end
T.ok(#c2 == math.floor(0.3 * 449) and #c2 + #e2 == 449 and overlap == 0, "split by fraction partitions")
local same3, same4 = true, true
for r = 1, #c2 do
  same3 = same3 and c2:row(r).id == c3:row(r).id
  same4 = same4 and c2:row(r).id == c4:row(r).id
end
T.ok(same3 and not same4, "split by fraction is seeded")
local g = eldr.gen{requests = 50, layers = 4, experts = 16, top_k = 2, seed = 3, arrival_rate = 10}
local tc, te = g:split{time = 2.0}
local okt = true
for r = 1, #tc do okt = okt and tc:row(r).arrival < 2.0 end
for r = 1, #te do okt = okt and te:row(r).arrival >= 2.0 end
T.ok(okt and #tc + #te == 50, "split by time")

-- gen: deterministic for a seed, options checked
local g2 = eldr.gen{requests = 50, layers = 4, experts = 16, top_k = 2, seed = 3, arrival_rate = 10}
local g3 = eldr.gen{requests = 50, layers = 4, experts = 16, top_k = 2, seed = 4, arrival_rate = 10}
local function sum_counts(tr)
  local s = 0
  for r = 1, #tr do for l = 0, 3 do for e, c in ipairs(tr:counts(r, l)) do s = s + c * e * (l + 1) * r end end end
  return s
end
T.ok(sum_counts(g) == sum_counts(g2) and sum_counts(g) ~= sum_counts(g3), "gen deterministic for a seed")
T.eq(tostring(g), "Trace<50 req, L=4 E=16 k=2>", "gen geometry")
T.err(function() eldr.gen{requests = 10, mix_prob = 2} end, "eldr.gen: bad argument 'mix_prob'", "gen names a bad option value")
T.err(function() eldr.gen{requets = 10} end, "eldr.gen: unknown option 'requets'", "gen rejects an unknown option")
T.err(function() eldr.gen{domains = 3, domain_shares = {1, 2}} end, "bad argument 'domain_shares'", "gen domain_shares length")

-- save and load back
local path = T.tmp .. "/g.h5"
g:save(path)
local back = eldr.load(path)
T.ok(#back == 50 and sum_counts(back) == sum_counts(g), "save/load round trip")

-- import the JSON-lines fixture
local imp = eldr.import(T.root .. "/tests/fixtures/import/good.jsonl")
T.ok(#imp >= 1 and imp:info().k >= 1, "import jsonl")
T.err(function() eldr.import(T.root .. "/tests/fixtures/import/bad_conservation.jsonl") end,
      "eldr.import: ", "import reports a bad file")
-- the reference's other forms: a count array and proxy frames need the
-- top-k (and the frames L and E); a capture opens with eldr.load too
local fix = T.root .. "/tests/fixtures/import/"
local npy = eldr.import(fix .. "good_counts.npy", {top_k = 2})
local frames = eldr.import(fix .. "good_capture.frames", {top_k = 2, layers = 3, experts = 8})
local cap = eldr.load(fix .. "good_reference.npz")
T.ok(#npy == 6 and #frames == 6 and #cap == 6 and npy:info().k == 2,
     "import npy and frames, load a capture")
T.ok(npy:row(1).prompt_tokens == cap:row(1).prompt_tokens and
     frames:row(6).prompt_tokens == cap:row(6).prompt_tokens,
     "npy and frames prompt lengths are the capture's")
T.err(function() eldr.import(fix .. "good_counts.npy") end, "holds no top-k",
      "a count array without top_k")

-- errors
T.err(function() eldr.load("/nonexistent.h5") end, "eldr.load: ", "load of a missing file")
T.err(function() eldr.load(42) end, "eldr.load: bad argument 'path' (string expected, got 42)", "load path type")
T.err(function() t:row(0) end, "bad argument 'row' (integer 1..449 expected, got 0)", "row out of range")
T.err(function() t:select({1, 450}) end, "bad argument 'rows[2]' (integer 1..449 expected, got 450)", "select row out of range")
T.err(function() t:select({label = "nope"}) end, "no label 'nope'", "select unknown label")
T.err(function() t:split{count = 1, time = 2} end, "exactly one of count, fraction, time", "split needs one rule")
T.err(function() t:counts(1, 24) end, "bad argument 'layer' (integer 0..23 expected, got 24)", "counts layer range")

-- __gc frees; a collected object is never reused by mistake
local tmp = t:select({1, 2, 3})
getmetatable(tmp).__gc(tmp)
T.err(function() return #tmp end, "empty Trace", "a released trace is refused, not a crash")
getmetatable(tmp).__gc(tmp) -- twice is harmless
T.ok(true, "double release is harmless")
T.done()
