-- K-means: balance, objective recomputed, exactness of the balanced
-- assignment against enumeration, init/iters = 0, unbalanced rule, errors.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local s = eldr.signatures(t, {variant = "count_idf"})
local n = #s
local km = eldr.kmeans(s, {k = 4, seed = 2})
local cap = math.ceil(n / 4)
local sum, over = 0, false
for c = 1, 4 do sum = sum + km.sizes[c]; over = over or km.sizes[c] > cap end
T.ok(sum == n and not over, "balanced: sizes within ceil(N/K)")
-- objective from the definition, with Lua dot products
local cent = km.centroids
local function dot(a, b) local x = 0 for i = 1, #a do x = x + a[i] * b[i] end return x end
local crow = {}
for c = 1, 4 do crow[c] = cent:row(c) end
local obj = 0
for i = 1, n do obj = obj + 1 - dot(s:row(i), crow[km.assignment[i]]) end
T.near(km.objective, obj, 1e-6, "objective = sum of cosine distances")
local km2 = eldr.kmeans(s, {k = 4, seed = 2})
T.ok(km2.objective == km.objective and km2.assignment[100] == km.assignment[100], "deterministic for a seed")

-- exactness: N = 8, K = 2, cap 4, every balanced assignment enumerated
local small = s:sub({1, 50, 99, 150, 201, 260, 330, 400})
local init = {2, 7}
local r0 = eldr.kmeans(small, {k = 2, init = init, iters = 0})
T.ok(r0.centroids:row(1)[5] == small:row(2)[5] and r0.centroids:row(2)[9] == small:row(7)[9],
     "iters = 0 keeps the init rows as centroids")
local sims = {}
for i = 1, 8 do sims[i] = {small:cos(i, 2), small:cos(i, 7)} end
local best = math.huge
for mask = 0, 255 do
  local ones, cost = 0, 0
  for i = 1, 8 do
    local c = (mask >> (i - 1)) & 1
    ones = ones + c
    cost = cost + 1 - sims[i][c + 1]
  end
  if ones <= 4 and 8 - ones <= 4 and cost < best then best = cost end
end
T.near(r0.objective, best, 1e-6, "balanced assignment is the optimum (enumeration)")
T.ok(r0.sizes[1] <= 4 and r0.sizes[2] <= 4 and r0.iterations == 0, "iters = 0 respects capacity")

-- unbalanced: every point at its most similar centroid
local u = eldr.kmeans(s, {k = 4, balanced = false, seed = 2})
local okn = true
local uc = {}
for c = 1, 4 do uc[c] = u.centroids:row(c) end
for i = 1, n, 7 do
  local row, bc, bs = s:row(i), 1, -2
  for c = 1, 4 do local v = dot(row, uc[c]); if v > bs + 1e-9 then bs, bc = v, c end end
  okn = okn and (u.assignment[i] == bc or math.abs(dot(row, uc[u.assignment[i]]) - bs) < 1e-6)
end
T.ok(okn and not u.balanced, "unbalanced: nearest centroid")

-- progress callback, and an error inside it stops the fit cleanly
local calls = 0
eldr.kmeans(s, {k = 4, progress = function() calls = calls + 1 end})
T.ok(calls >= 1, "progress called")
T.err(function() eldr.kmeans(s, {k = 4, progress = function() error("stop here") end}) end,
      "stop here", "an error in progress propagates")

-- K = 1 and K = N
local one = eldr.kmeans(small, {k = 1})
T.eq(one.sizes[1], 8, "K = 1 holds every row")
local all = eldr.kmeans(small, {k = 8})
local okall = true
for c = 1, 8 do okall = okall and all.sizes[c] == 1 end
T.ok(okall and all.objective < 1e-5, "K = N: one row each, objective 0")

-- errors name the argument
local m600 = eldr.signatures(eldr.load(T.root .. "/samples/small.h5"), {variant = "count"})
T.err(function() eldr.kmeans(m600, {k = 0}) end,
      "eldr.kmeans: bad argument 'k' (integer 1..600 expected, got 0)", "k = 0 is refused, named")
T.err(function() eldr.kmeans(s, {}) end, "bad argument 'k' (integer 1..449 expected, got nil)", "k required")
T.err(function() eldr.kmeans(s, {k = 2, init = {1, 1}}) end, "bad argument 'init'", "duplicate init rows")
T.err(function() eldr.kmeans(s, {k = 2, init = {1}}) end, "2 rows (one per cluster) expected", "init length")
T.err(function() eldr.kmeans(s, {k = 2, iters = 0}) end, "bad argument 'iters'", "iters = 0 needs init")
T.err(function() eldr.kmeans(eldr.matrix({{1, 0}, {0, 0}}), {k = 1}) end,
      "row 2 is an all-zero signature", "zero row named (1-based)")
T.err(function() eldr.kmeans(s, {k = 2, balance = true}) end, "unknown option 'balance'", "unknown option")
T.done()
