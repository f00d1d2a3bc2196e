// Load an ONNX model in onnxruntime-node or onnxruntime-web (wasm, under Node) and run feeds.
//   node run_model.cjs node|web MODEL.onnx FEEDS.json|- OUT.json [all|basic|disabled [WARMUP.onnx]]
// FEEDS.json: [{name: {type, dims, data: base64}}, ...] (one object per sample); "-": load only.
// WARMUP.onnx: a session created (and released) first, so that the wasm start-up is not measured.
// OUT.json: {version, load_cpu, load_wall, first_cpu, first_wall, peak_kb, load_peak_kb, outputs: [[{name, type, dims, data}], ...]}
// or {error}; first_cpu: CPU seconds of the first run (0 without feeds); peak_kb: the process's peak RSS at the end,
// load_peak_kb: right after the session was created.
// stdout: onnxruntime's profile (JSON events) of the runs, unless SHRINKRAY_NO_PROFILE=1.
// One process per call: peak memory (VmHWM) is a high-water mark.
"use strict";
const fs = require("fs");

const [backend, modelPath, feedsPath, outPath, level = "all", warmup = ""] = process.argv.slice(2);
const TYPES = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array,
               int8: Int8Array, float64: Float64Array, bool: Uint8Array};

function vm(key) {
  const line = fs.readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith(key + ":"));
  return line ? parseInt(line.split(/\s+/)[1], 10) : 0;
}

function decode(spec) {
  const buf = Buffer.from(spec.data, "base64");
  const Arr = TYPES[spec.type];
  const copy = new Uint8Array(buf.byteLength);
  copy.set(buf);
  return new Arr(copy.buffer, 0, buf.byteLength / Arr.BYTES_PER_ELEMENT);
}

// onnxruntime's profile, printed to stdout for the caller to read (web prints it itself, through
// the wasm module's own stdout; node writes a file).
async function profile(session, backend, runs) {
  process.stdout.write("\nPROFILE\n");
  await session.endProfiling();
  if (backend === "node") {
    await session.release();
    const path = require("path");
    const base = path.basename(outPath) + ".profile";
    // Written in the background, in chunks: wait (up to a minute on a loaded machine) until it holds
    // one "model_run" event per run and ends with "]".
    let text = "";
    for (let i = 0; i < 600; i++) {
      const file = fs.readdirSync(path.dirname(outPath)).find((f) => f.startsWith(base));
      text = file ? fs.readFileSync(path.join(path.dirname(outPath), file), "utf8") : "";
      if (text.trim().endsWith("]") && (text.match(/"model_run"/g) || []).length >= runs) {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    process.stdout.write(text || "[]");
  }
  process.stdout.write("\nEND-PROFILE\n");
}

async function main() {
  const ort = require(backend === "web" ? "onnxruntime-web" : "onnxruntime-node");
  if (backend === "web") {
    ort.env.wasm.numThreads = 1;
  }
  const profiling = feedsPath !== "-" && process.env.SHRINKRAY_NO_PROFILE !== "1";
  const options = {executionProviders: [backend === "web" ? "wasm" : "cpu"], graphOptimizationLevel: level,
                   intraOpNumThreads: 1, interOpNumThreads: 1, enableProfiling: profiling,
                   profileFilePrefix: outPath + ".profile"};
  if (warmup) {
    await (await ort.InferenceSession.create(fs.readFileSync(warmup), options)).release();
  }
  const model = fs.readFileSync(modelPath);
  const cpu0 = process.cpuUsage();
  const wall0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, options);
  const cpu = process.cpuUsage(cpu0);
  const wall = Number(process.hrtime.bigint() - wall0) / 1e9;
  const peak = vm("VmHWM");
  const samples = feedsPath !== "-" ? JSON.parse(fs.readFileSync(feedsPath, "utf8")) : [];
  const outputs = [];
  let first = 0;
  let firstWall = 0;
  for (const sample of samples) {
    const feeds = {};
    for (const [name, spec] of Object.entries(sample)) {
      feeds[name] = new ort.Tensor(spec.type, decode(spec), spec.dims);
    }
    const run0 = process.cpuUsage();
    const wall1 = process.hrtime.bigint();
    const got = await session.run(feeds);
    if (outputs.length === 0) {
      const used = process.cpuUsage(run0);
      first = (used.user + used.system) / 1e6;
      firstWall = Number(process.hrtime.bigint() - wall1) / 1e9;
    }
    outputs.push(session.outputNames.map((name) => ({
      name, type: got[name].type, dims: got[name].dims,
      data: Buffer.from(got[name].data.buffer, got[name].data.byteOffset, got[name].data.byteLength).toString("base64"),
    })));
  }
  if (profiling && samples.length) {
    await profile(session, backend, samples.length);
  }
  const version = ort.env.versions ? (ort.env.versions.web || ort.env.versions.node || ort.env.versions.common) : "";
  fs.writeFileSync(outPath, JSON.stringify({version, load_cpu: (cpu.user + cpu.system) / 1e6, load_wall: wall,
                                            first_cpu: first, first_wall: firstWall, peak_kb: vm("VmHWM"), load_peak_kb: peak,
                                            outputs}));
}

// Exit only once stdout is flushed: process.exit() drops what is still queued for a pipe (the
// profile was cut at 64 KB), and onnxruntime's threads would keep the process alive otherwise.
function exitFlushed() {
  process.stdout.write("", () => process.exit(0));
}

main().then(exitFlushed, (err) => {
  fs.writeFileSync(outPath, JSON.stringify({error: String(err && err.message ? err.message : err).split("\n")[0]}));
  exitFlushed();
});
