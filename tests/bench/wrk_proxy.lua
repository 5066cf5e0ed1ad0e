-- tests/bench/wrk_proxy.lua - wrk script for tests/bench/proxy.sh:
-- non-streaming completions (a 64-token prompt) through eldrd --proxy.
-- done() writes TSV rows (what, size, seconds, rate) to $WRK_ROWS.

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  ok_n, failures = 0, 0
  local words = {}
  for i = 1, 64 do words[i] = "tok" .. i end
  body = '{"prompt":"' .. table.concat(words, " ") .. '","max_tokens":8}'
  headers = {["Content-Type"] = "application/json"}
end

function request()
  return wrk.format("POST", "/v1/completions", headers, body)
end

function response(status, hdrs, b)
  if status == 200 then ok_n = ok_n + 1 else failures = failures + 1 end
end

function done(summary, latency, requests)
  local n, bad = 0, 0
  for _, t in ipairs(threads) do
    n = n + t:get("ok_n")
    bad = bad + t:get("failures")
  end
  local e = summary.errors
  bad = bad + e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  local size = os.getenv("WRK_SIZE") or ""
  local out = assert(io.open(os.getenv("WRK_ROWS"), "w"))
  out:write(string.format("eldrd --proxy completions, instant upstreams (wrk)\t%s\t%.3f\t%.0f requests/s\n",
                          size, secs, n / secs))
  out:write(string.format("eldrd --proxy completion latency p99 (wrk)\t%s\t%.3f\t%.3f ms\n",
                          size, secs, latency:percentile(99) / 1000))
  out:write(string.format("eldrd --proxy failed requests (wrk)\t%s\t%.3f\t%d of %d\n",
                          size, secs, bad, summary.requests))
  out:close()
end
