-- In-sample simulate (issue 30 item 6): eldr.simulate says when the rows
-- it simulates are the model's own calibration rows (info.in_sample,
-- info.in_sample_rows; one warning on stderr, checked by
-- tests/cli/lua_insample.sh), and stays silent on held-out rows.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local quick = {rate = 8, output_tokens = 16, policy = {"eldr", "jsq"}}
local function sim(trace, extra)
  local o = {}
  for k, v in pairs(quick) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  local _, info = eldr.simulate(trace, o)
  return info
end

-- a model fitted on the whole trace, simulated on it: every row in-sample
local m = eldr.fit(t, {k = 2, layers = "all"})
local info = sim(t, {model = m})
T.ok(info.in_sample == true and info.in_sample_rows == #t,
     "model fitted on this trace: in-sample, every row",
     ("in_sample %s, rows %s of %d"):format(tostring(info.in_sample), tostring(info.in_sample_rows), #t))

-- the same model on a split of the same trace: the evaluated rows are its rows too
info = sim(t, {model = m, calib_split = 200})
T.ok(info.in_sample == true and info.in_sample_rows == info.eval_rows and info.eval_rows == #t - 200,
     "model fitted on this trace, split asked: the evaluation rows are in-sample",
     ("rows %s, eval %s"):format(tostring(info.in_sample_rows), tostring(info.eval_rows)))

-- held out: fitted on the calibration part, simulated on the rest
local calib, eval = eldr.calib_split(t, 200)
local m2 = eldr.fit(calib, {k = 2, layers = "all"})
info = sim(eval, {model = m2})
T.ok(info.in_sample == false and info.in_sample_rows == nil, "held-out rows: not in-sample")
info = sim(eval, {model = m2, calib = calib})
T.ok(info.in_sample == false, "held-out rows with the calibration trace given: not in-sample")

-- a model fitted by simulate itself
info = sim(t, {workers = 2})
T.ok(info.fitted and info.in_sample == false, "default split, fitted here: not in-sample")
info = sim(t, {workers = 2, calib_split = 0})
T.ok(info.fitted and info.in_sample == true and info.in_sample_rows == info.eval_rows,
     "calib_split = 0 (calibrated on the simulated rows): in-sample")
info = sim(t, {workers = 2, calib = t})
T.ok(info.in_sample == true and info.in_sample_rows == #t, "calib is the trace itself: in-sample")

-- no policy uses the model: nothing to warn about
info = sim(t, {model = m, policy = {"jsq", "rr"}})
T.ok(info.in_sample == false, "baselines only: the model's rows do not matter")

-- Traces cut from one loaded Trace know which of its rows they hold
info = sim(t, {model = m2})
T.ok(info.in_sample == true and info.in_sample_rows == 200 and info.eval_rows == #t,
     "fitted on calib_split's 200 rows, simulated on the whole trace: partly in-sample, 200 rows",
     ("rows %s of %s"):format(tostring(info.in_sample_rows), tostring(info.eval_rows)))
info = sim(calib, {model = m2})
T.ok(info.in_sample == true and info.in_sample_rows == #calib, "simulated on its own calibration Trace")
local rows = {}
for r = 1, 60 do rows[#rows + 1] = r end
local head = t:select(rows)
local m3 = eldr.fit(head, {k = 2, layers = "all"})
local later = {}
for r = 51, 200 do later[#later + 1] = r end
info = sim(t:select(later), {model = m3})
T.ok(info.in_sample_rows == 10, "select 1..60 fitted, select 51..200 simulated: the 10 shared rows",
     tostring(info.in_sample_rows))
local a, b = head:split{count = 30}
info = sim(b, {model = eldr.fit(a, {k = 2, layers = "all"})})
T.ok(info.in_sample == false, "a split of a selection: the two halves share no row")
info = sim(t:select(function(r) return r.row > 400 end), {model = m})
T.ok(info.in_sample == true and info.in_sample_rows == #t - 400,
     "a selection of the trace the model was fitted on: in-sample", tostring(info.in_sample_rows))
T.done()
