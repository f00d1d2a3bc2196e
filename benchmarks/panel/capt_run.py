"""captcha-whisperer on seeded captchas (captcha.ImageCaptcha): the texts it reads.
python capt_run.py SEED N OUT.json [MODEL]"""
import json, os, random, sys
from pathlib import Path
from captcha.image import ImageCaptcha
seed, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4:
    os.environ["CAPTCHA_OCR_MODEL"] = sys.argv[4]
import captcha_whisperer
from captcha_whisperer.recognizer import CaptchaRecognizer
rec = CaptchaRecognizer(threads=1)
rng = random.Random(seed)
import captcha.image as ci
class _Seeded(random.Random):
    def randbelow(self, n):
        return self.randrange(n)
    def randbits(self, k):
        return self.getrandbits(k)
gen = ImageCaptcha(width=160, height=60)
res = {}
for i in range(n):
    text = "".join(rng.choice("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(4, 6)))
    ci.secrets = _Seeded(seed * 100003 + i)  # captcha draws its noise from `secrets`: seed it
    img = gen.generate_image(text)
    import io; buf = io.BytesIO(); img.save(buf, "PNG")
    res[f"{i}:{text}"] = rec.recognize_bytes(buf.getvalue())["text"]
Path(out).write_text(json.dumps(res))
print(sum(k.split(":")[1] == v for k, v in res.items()), "of", n, "read right")
