-- rho and greedy layer selection against brute force in Lua.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local full = eldr.load(T.data)
local rows = {}
for i = 1, 40 do rows[i] = i * 11 end
local t = full:select(rows)
local L, E = t:geometry()

-- Spearman with average ranks, from the definition
local function ranks(x)
  local idx = {}
  for i = 1, #x do idx[i] = i end
  table.sort(idx, function(a, b) return x[a] < x[b] end)
  local r, i = {}, 1
  while i <= #idx do
    local j = i
    while j < #idx and x[idx[j + 1]] == x[idx[i]] do j = j + 1 end
    for m = i, j do r[idx[m]] = (i + j) / 2 end
    i = j + 1
  end
  return r
end
local function spearman(a, b)
  local ra, rb = ranks(a), ranks(b)
  local n, ma, mb = #a, 0, 0
  for i = 1, n do ma, mb = ma + ra[i], mb + rb[i] end
  ma, mb = ma / n, mb / n
  local sab, saa, sbb = 0, 0, 0
  for i = 1, n do
    sab = sab + (ra[i] - ma) * (rb[i] - mb)
    saa = saa + (ra[i] - ma) ^ 2
    sbb = sbb + (rb[i] - mb) ^ 2
  end
  return sab / math.sqrt(saa * sbb)
end
-- decode vectors over all layers
local dec = {}
for i = 1, #t do
  local v = {}
  for l = 0, L - 1 do for _, c in ipairs(t:counts(i, l, "decode")) do v[#v + 1] = c end end
  dec[i] = v
end
local function dcos(i, j)
  local ab, aa, bb = 0, 0, 0
  for k = 1, #dec[i] do
    ab, aa, bb = ab + dec[i][k] * dec[j][k], aa + dec[i][k] ^ 2, bb + dec[j][k] ^ 2
  end
  return ab / math.sqrt(aa * bb)
end
local function brute_rho(sigs)
  local a, b = {}, {}
  for i = 1, #t do
    for j = i + 1, #t do
      -- the same 2^-36 grid as rho.h, so exact ties tie here too
      local big = 0x1.8p16
      a[#a + 1] = ((1 - sigs:cos(i, j)) + big) - big
      b[#b + 1] = ((1 - dcos(i, j)) + big) - big
    end
  end
  return spearman(a, b)
end

for _, v in ipairs({"count", "count_idf", "binary"}) do
  local rho = eldr.rho(t, {variant = v, pairs = "all"})
  local want = brute_rho(eldr.signatures(t, {variant = v}))
  T.near(rho, want, 1e-6, "rho(" .. v .. ", all pairs) == brute force")
end
local rho_m, det = eldr.rho(t, {variant = "count", layers = {0, 7, 13}, pairs = "all"})
T.near(rho_m, brute_rho(eldr.signatures(t, {variant = "count", layers = {0, 7, 13}})), 1e-6,
       "rho of a layer list == brute force")
T.ok(det.n_star == 3 and det.mask[2] == 7 and det.pairs == 40 * 39 / 2, "rho details")
local _, ci = eldr.rho(full, {ci = true, ci_samples = 200})
T.ok(ci.ci[1] <= ci.rho and ci.rho <= ci.ci[2], "bootstrap interval holds rho")
local r1 = eldr.rho(full, {pairs = 5000, seed = 3})
local r2 = eldr.rho(full, {pairs = 5000, seed = 3})
T.eq(r1, r2, "rho deterministic for a seed")

-- greedy: the first step is the best single layer; N* is the first peak
local sel = eldr.select_layers(t, {variant = "count", pairs = "all"})
local best, best_l = -2, nil
for l = 0, L - 1 do
  local r = eldr.rho(t, {variant = "count", layers = {l}, pairs = "all"})
  if r and r > best + 1e-12 then best, best_l = r, l end
end
T.eq(sel.order[1], best_l, "greedy starts with the best single layer")
T.near(sel.curve[1], best, 1e-9, "curve[1] is that layer's rho")
local peak = 1
for s = 2, #sel.curve do if sel.curve[s] > sel.curve[peak] then peak = s end end
T.ok(sel.n_star == peak and #sel.mask == peak and sel.rho == sel.curve[peak], "N* at the curve's first peak")
-- second step: best pair containing the first layer
local best2, best2_l = -2, nil
for l = 0, L - 1 do
  if l ~= best_l then
    local r = eldr.rho(t, {variant = "count", layers = {math.min(l, best_l), math.max(l, best_l)}, pairs = "all"})
    if r and r > best2 + 1e-12 then best2, best2_l = r, l end
  end
end
T.eq(sel.order[2], best2_l, "greedy second step by exhaustive search")
local _, rsel = eldr.recipe(t, {variant = "count", layers = "auto", pairs = "all"})
T.ok(rsel.n_star == sel.n_star and rsel.rho == sel.rho, "recipe with layers = auto runs the same selection")
local curve, n_star, order = eldr.rho_curve(t, {variant = "count", pairs = "all"})
T.ok(#curve == L and n_star == sel.n_star and order[1] == sel.order[1], "rho_curve agrees with select_layers")
local auto_rho, auto = eldr.rho(t, {variant = "count", layers = "auto", pairs = "all"})
T.ok(auto.n_star == sel.n_star and auto_rho == sel.rho, "rho with layers = auto")

-- all variants: best first, gate_logit unavailable here
local vs = eldr.rho_variants(t, {pairs = 2000})
local sorted, unavailable = true, nil
for i = 2, #vs do
  if vs[i].available and vs[i - 1].available and vs[i].rho > vs[i - 1].rho then sorted = false end
end
for _, v in ipairs(vs) do if v.variant == "gate_logit" then unavailable = not v.available end end
T.ok(#vs == 6 and sorted and unavailable, "rho_variants best first, missing data marked")

T.err(function() eldr.rho(t, {pairs = 0}) end, "bad argument 'pairs'", "pairs must be positive")
T.err(function() eldr.rho(t, {layers = "some"}) end, "bad argument 'layers'", "layers spec checked")
T.err(function() eldr.rho(t, {varient = "count"}) end, "unknown option 'varient'", "rho unknown option")
T.err(function() eldr.rho(eldr.gen{requests = 10, decode_tokens = 0, layers = 2, experts = 8, top_k = 2}) end,
      "needs decode_counts", "rho without decode counts")
T.done()
