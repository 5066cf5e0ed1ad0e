-- Models: fit report, save/load, reference JSON, route against the band
-- rule recomputed in Lua, eldr.model from k-means, calibrate.fit == fit.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local calib, eval = t:split{count = 300}
local m, rep = eldr.fit(calib, {k = 4, seed = 1})
local info = m:info()
T.ok(info.K == 4 and info.variant == "count_idf" and info.n_star == #info.layers, "fit model info")
local sum = 0
for c = 1, 4 do sum = sum + rep.sizes[c] end
T.eq(sum, #calib - #rep.zero_rows, "sizes cover the fitted rows")
T.ok(#rep.curve == 24 and rep.mask[1] == info.layers[1] and rep.rho == info.rho, "report carries the selection")
local counted = {0, 0, 0, 0}
for _, a in ipairs(rep.assignment) do if a > 0 then counted[a] = counted[a] + 1 end end
T.ok(counted[1] == rep.sizes[1] and counted[4] == rep.sizes[4], "assignment matches sizes")
T.ok(tostring(m):find("Model<K=4, count_idf", 1, true) == 1, "model tostring")

-- save / load / JSON round trips keep the centroids
local function same_centroids(a, b)
  local ca, cb = a:centroids(), b:centroids()
  for c = 1, 4 do if math.abs(ca:cos(c, c) - 1) > 1e-6 then return false end end
  local ra, rb = ca:row(3), cb:row(3)
  for j = 1, #ra do if math.abs(ra[j] - rb[j]) > 1e-6 then return false end end
  return true
end
local path = T.tmp .. "/m.h5"
m:save(path)
local back = eldr.load_model(path)
T.ok(same_centroids(m, back) and back:info().rho == info.rho, "save/load round trip")
T.eq(eldr.info(path).kind, "model", "eldr.info on a model file")
local js = m:to_json()
local fromjs = eldr.model_from_json(js)
T.ok(same_centroids(m, fromjs) and fromjs:info().K == 4, "reference JSON round trip")
m:save_json(T.tmp .. "/m.json")
T.ok(same_centroids(m, eldr.load_model(T.tmp .. "/m.json")), "save_json/load_model(.json)")
T.err(function() eldr.model_from_json("{}") end, "eldr.model_from_json: ", "bad JSON refused")

-- route: the band rule recomputed from the similarities
local sigs = m:signatures(eval)
local cent = m:centroids()
local function dot(a, b) local x = 0 for i = 1, #a do x = x + a[i] * b[i] end return x end
local crow = {}
for c = 1, 4 do crow[c] = cent:row(c) end
local function band_rule(sig, loads, tau)
  local sim, max = {}, -2
  for c = 1, 4 do sim[c] = dot(sig, crow[c]); if sim[c] > max then max = sim[c] end end
  local band = {}
  for c = 1, 4 do if sim[c] >= max - tau then band[#band + 1] = c end end
  if tau > 0 and #band == 1 then
    local second, sv = nil, -3
    for c = 1, 4 do if c ~= band[1] and sim[c] > sv then second, sv = c, sim[c] end end
    band[2] = second
    table.sort(band)
  end
  local best = band[1]
  for _, c in ipairs(band) do if loads[c] < loads[best] then best = c end end
  return best
end
local agree, tried = 0, 0
local loads = {3, 1, 4, 1}
for i = 1, #eval, 5 do
  local sig = sigs:sub(i)
  if #sig:zero_rows() == 0 then
    for _, tau in ipairs({0, 0.05, 0.1, 0.3}) do
      tried = tried + 1
      local d = m:route(sig, loads, tau)
      if d.worker == band_rule(sig:row(1), loads, tau) then agree = agree + 1 end
    end
  end
end
T.ok(tried > 50 and agree == tried, "route follows the band rule", agree .. "/" .. tried)
local d = m:route(sigs:sub(1), {0, 0, 0, 0}, 0)
local near = m:nearest(sigs:sub(1))
T.ok(d.rule == "locality" and d.worker == near[1] and #d.sim == 4 and d.name == "w" .. (d.worker - 1),
     "tau = 0: the nearest centroid")
local j = m:route(sigs:sub(1), {5, 2, 7, 9}, 2)
T.ok(j.worker == 2 and #j.band == 4, "tau = 2: join the shortest queue")
local raw = m:route(sigs:row(1), {0, 0, 0, 0}, 0)
T.eq(raw.worker, d.worker, "route takes a plain table")
T.err(function() m:route(sigs:sub(1), {1, 2}) end, "bad argument 'loads' (4 in-flight counts", "loads length")
T.err(function() m:route(sigs, {0, 0, 0, 0}) end, "bad argument 'signature'", "route needs one row")
T.err(function() m:route(sigs:sub(1), {0, 0, 0, 0}, -1) end, "bad argument 'tau'", "negative tau")

-- eldr.model from a Lua-side k-means; calibrate.fit == eldr.fit
local r = eldr.recipe(calib, {layers = "all"})
local km = eldr.kmeans(r:signatures(calib), {k = 3})
local mm = eldr.model(r, km.centroids, {top_k = 4, workers = {"a", "b", "c"}})
T.ok(mm:info().K == 3 and mm:workers()[2] == "b", "eldr.model from k-means")
T.ok(mm:info().nearest_share == nil, "eldr.model without calibration: no drift baseline")
-- with the signatures it was fitted on: their nearest-centroid shares,
-- recounted here by the argmax of the dot product (lowest index on a tie)
local csig = r:signatures(calib)
local mc = eldr.model(r, km.centroids, {top_k = 4, calibration = csig})
local ns, count = mc:info().nearest_share, {0, 0, 0}
for i = 1, #calib do
  local row, best, bs = csig:row(i), 1, -math.huge
  for c = 1, 3 do
    local cen, d = km.centroids:row(c), 0
    for j = 1, #row do d = d + row[j] * cen[j] end
    if d > bs then best, bs = c, d end
  end
  count[best] = count[best] + 1
end
T.ok(ns and #ns == 3, "eldr.model with calibration: a drift baseline")
for c = 1, 3 do T.near(ns[c], count[c] / #calib, 1e-9, "nearest share of centroid " .. c) end
T.err(function() eldr.model(r, km.centroids, {top_k = 4, calibration = eldr.matrix({{1, 0}})}) end,
      "bad argument 'calibration'", "calibration of another dimension refused")
local cm, crep = eldr.calibrate.fit(calib, {k = 4, seed = 1})
T.near(crep.objective, rep.objective, 1e-12, "calibrate.fit gives eldr.fit's objective")
local er = eldr.calibrate.report(cm, eval)
T.ok(er.rows == #eval and er.mean_sim > 0 and er.imbalance >= 1, "calibrate.report on held-out rows")
local run = eldr.calibrate.run(t, {k = 2, split = 0.5})
T.ok(#run.calib + #run.eval == #t and run.model:info().K == 2, "calibrate.run pipeline")
T.err(function() eldr.calibrate.fit(calib, {kk = 2}) end, "eldr.calibrate.fit: unknown option 'kk'", "calibrate options checked")

T.err(function() eldr.fit(calib, {k = 301}) end, "bad argument 'k' (integer 1..256 expected, got 301)", "fit k range: the one K range, 1..256")
T.err(function() eldr.fit(calib, {k = 2, workers = {"a"}}) end, "bad argument 'workers'", "fit workers length")
T.err(function() eldr.load_model("/nonexistent.h5") end, "eldr.load_model: ", "load_model missing file")
T.err(function() m:set_tau(-1) end, "bad argument 'tau'", "set_tau checked")
T.eq(m:set_tau(0.2):info().tau, 0.2, "set_tau")
T.done()
