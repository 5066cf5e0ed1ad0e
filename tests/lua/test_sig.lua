-- Recipes and signatures: unit rows, cosines, IDF by hand, matrix views.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data):select({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
local L, E = t:geometry()
local r = eldr.recipe(t, {variant = "count_idf", layers = {3, 5}})
local ri = r:info()
T.ok(ri.variant == "count_idf" and ri.dim == 2 * E and ri.layers[1] == 3 and ri.has_idf, "recipe info")
T.ok(tostring(r):find("Recipe<count_idf, 2 of 24 layers", 1, true) ~= nil, "recipe tostring")
local s = r:signatures(t)
local n, d = s:dims()
T.ok(n == 20 and d == 2 * E and #s == 20, "signature dims")
T.ok(tostring(s) == "Signatures<20 x 64, count_idf>", "signature tostring")

-- by hand: idf = log((N+1)/(df+1)), s = c * idf over layers 3 and 5, one L2 norm
local N = #t
local df = {}
for _, l in ipairs({3, 5}) do
  df[l] = {}
  for e = 1, E do df[l][e] = 0 end
  for i = 1, N do
    for e, c in ipairs(t:counts(i, l)) do if c > 0 then df[l][e] = df[l][e] + 1 end end
  end
end
local maxerr = 0
for i = 1, N do
  local v = {}
  for _, l in ipairs({3, 5}) do
    for e, c in ipairs(t:counts(i, l)) do v[#v + 1] = c * math.log((N + 1) / (df[l][e] + 1)) end
  end
  local nn = 0
  for _, x in ipairs(v) do nn = nn + x * x end
  nn = math.sqrt(nn)
  local row = s:row(i)
  for j = 1, #v do maxerr = math.max(maxerr, math.abs(row[j] - v[j] / nn)) end
end
T.ok(maxerr < 1e-6, "count_idf signatures equal the hand computation", "max error " .. maxerr)

-- unit rows, cos symmetric, cos(i, i) = 1, to_table == rows
local unit, sym = true, true
for i = 1, n do
  local nn = 0
  for _, x in ipairs(s:row(i)) do nn = nn + x * x end
  unit = unit and math.abs(nn - 1) < 1e-5
  sym = sym and math.abs(s:cos(i, 1) - s:cos(1, i)) < 1e-12
end
T.ok(unit, "signatures are unit rows")
T.ok(sym and math.abs(s:cos(4, 4) - 1) < 1e-6, "cos symmetric, cos(i,i) = 1")
local tab = s:to_table()
T.ok(#tab == n and #tab[1] == d and tab[7][9] == s:row(7)[9], "to_table matches row")
local sub = s:sub({3, 1})
T.ok(#sub == 2 and sub:row(2)[5] == s:row(1)[5] and sub:variant() == "count_idf", "sub selects rows")

-- eldr.signatures with options == recipe then signatures
local s2 = eldr.signatures(t, {variant = "binary", layers = "all"})
T.ok(select(2, s2:dims()) == L * E and s2:variant() == "binary", "signatures from options")
local bin = s2:row(1)
local nz = 0
for _, x in ipairs(bin) do if x > 0 then nz = nz + 1 end end
local want = 1 / math.sqrt(nz)
local okb = true
for _, x in ipairs(bin) do okb = okb and (x == 0 or math.abs(x - want) < 1e-6) end
T.ok(okb, "binary signature is 1/sqrt(nnz) on the support")

-- matrix: zero rows reported, normalisation
local m = eldr.matrix({{3, 4}, {0, 0}, {1, 0}})
T.ok(math.abs(m:row(1)[1] - 0.6) < 1e-7 and m:zero_rows()[1] == 2 and #m:zero_rows() == 1, "matrix normalises, reports zero rows")
T.eq(m:cos(1, 2), 0, "cos with a zero row is 0")
local raw = eldr.matrix({{3, 4}}, {normalize = false})
T.eq(raw:row(1)[2], 4, "matrix without normalisation")

-- errors
T.err(function() eldr.recipe(t, {variant = "tfidf"}) end, "eldr.recipe: bad argument 'variant'", "unknown variant")
T.err(function() eldr.recipe(t, {layers = {0, 24}}) end, "bad argument 'layers[2]' (integer 0..23 expected, got 24)", "layer out of range")
T.err(function() eldr.recipe(t, {variant = "gate_logit"}):signatures(t) end, "gate", "gate variant without gate data")
T.err(function() s:row(21) end, "bad argument 'i' (integer 1..20 expected, got 21)", "row out of range")
T.err(function() eldr.matrix({{1, 2}, {1}}) end, "bad argument 'rows[2]'", "ragged matrix")
T.err(function() eldr.signatures("x") end, "eldr.signatures: bad argument 'trace' (Trace expected, got 'x')", "signatures needs a trace")
T.done()
