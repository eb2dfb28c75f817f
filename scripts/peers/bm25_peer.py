#!/usr/bin/env python3
"""A plain rank_bm25 peer for submem's M2, and the ablation that explains the gap.

Reads LoCoMo (`locomo10.json` or one sample) and LongMemEval files the way
submem's loaders do (LoCoMo: source id = dia_id, a shared photo's caption
appended as ``[shares a photo: ...]``, evidence split on ``;`` ``,`` and
white space; LongMemEval: source id ``<session id>:<turn index>``, gold = the
turns marked ``has_answer``), ranks every turn with ``rank_bm25.BM25Okapi``
and prints Recall@k (share of gold ids among the top k, averaged over the
questions with evidence) for a grid of variants. Each variant changes one
factor of the baseline towards what a tantivy-default M2 did, so the drop it
causes is that factor's share of the gap:

- ``text``: what is indexed: the turn only, ``speaker: text``, or
  ``[date] speaker: text`` (submem's ``Event::render``).
- ``stop``: the stop list: none, Lucene's 33 words, or scikit-learn's 318.
- ``idf``: rank_bm25's Okapi IDF (negative IDFs floored at 0.25 x the mean)
  or Lucene's ``ln(1 + (N - n + 0.5) / (n + 0.5))``.
- ``k1``: 1.5 (rank_bm25) or 1.2 (Lucene).

Needs ``pip install rank_bm25 numpy scikit-learn``. Example::

    python3 scripts/peers/bm25_peer.py --locomo locomo10.json \
        --longmemeval longmemeval_oracle.json
"""

import argparse
import json
import math
import re
import sys

import numpy as np
from rank_bm25 import BM25Okapi
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

LUCENE_STOP = {
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
}
STOP_LISTS = {"none": set(), "lucene": LUCENE_STOP, "sklearn": set(ENGLISH_STOP_WORDS)}
DIA_ID = re.compile(r"^D\d+:\d+$")
# tantivy's SimpleTokenizer: runs of alphanumeric characters.
WORD = re.compile(r"[^\W_]+")


def load_locomo(path):
    root = json.load(open(path, encoding="utf-8"))
    samples = root if isinstance(root, list) else [root]
    convs = []
    for sample in samples:
        conv = sample["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            date = conv.get(f"session_{n}_date_time")
            for t in conv[f"session_{n}"]:
                text = t.get("text", "")
                if t.get("blip_caption"):
                    text = f"{text} [shares a photo: {t['blip_caption']}]"
                turns.append({"id": t["dia_id"], "speaker": t["speaker"], "text": text, "date": date})
            n += 1
        known = {t["id"] for t in turns}
        questions = []
        for q in sample.get("qa", []):
            gold = []
            for raw in q.get("evidence", []):
                for piece in re.split(r"[;,\s]+", str(raw)):
                    if DIA_ID.match(piece) and piece in known and piece not in gold:
                        gold.append(piece)
            questions.append({"text": q["question"], "gold": gold, "category": q.get("category")})
        convs.append((sample.get("sample_id", "locomo"), turns, questions))
    return convs


def load_longmemeval(path):
    convs = []
    for item in json.load(open(path, encoding="utf-8")):
        turns, gold = [], []
        for sid, date, session in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
        ):
            for i, t in enumerate(session):
                tid = f"{sid}:{i}"
                turns.append({"id": tid, "speaker": t["role"], "text": t["content"], "date": date})
                if t.get("has_answer"):
                    gold.append(tid)
        q = {"text": item["question"], "gold": gold, "category": item["question_type"]}
        convs.append((item["question_id"], turns, [q]))
    return convs


def render(turn, text_mode):
    if text_mode == "turn":
        return turn["text"]
    if text_mode == "speaker" or not turn["date"]:
        return f"{turn['speaker']}: {turn['text']}"
    return f"[{turn['date']}] {turn['speaker']}: {turn['text']}"


def tokenize(text, stop):
    return [w for w in WORD.findall(text.lower()) if w not in stop]


class LuceneBM25(BM25Okapi):
    """BM25Okapi with Lucene's always-positive IDF."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


def recall_at_k(convs, text_mode, stop_name, idf, k1, k, skip_categories):
    stop = STOP_LISTS[stop_name]
    scores = []
    for _, turns, questions in convs:
        corpus = [tokenize(render(t, text_mode), stop) for t in turns]
        # rank_bm25 divides by zero on an empty corpus entry set only when all are empty.
        cls = LuceneBM25 if idf == "lucene" else BM25Okapi
        bm25 = cls(corpus, k1=k1, b=0.75)
        ids = [t["id"] for t in turns]
        for q in questions:
            if not q["gold"] or q["category"] in skip_categories:
                continue
            s = bm25.get_scores(tokenize(q["text"], stop))
            # Stable order: ties go to the earlier turn.
            top = np.argsort(-s, kind="stable")[:k]
            shown = {ids[i] for i in top}
            scores.append(sum(g in shown for g in q["gold"]) / len(q["gold"]))
    return float(np.mean(scores)) if scores else float("nan"), len(scores)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", action="append", default=[])
    ap.add_argument("--longmemeval", action="append", default=[])
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--skip-category", action="append", default=[], type=int,
                    help="LoCoMo categories to leave out (5 = adversarial)")
    args = ap.parse_args()
    sets = [(p, load_locomo(p)) for p in args.locomo] + [(p, load_longmemeval(p)) for p in args.longmemeval]
    if not sets:
        sys.exit("give at least one --locomo or --longmemeval file")
    baseline = dict(text_mode="turn", stop_name="sklearn", idf="okapi", k1=1.5)
    variants = [("rank_bm25 baseline (turn text, sklearn stop words)", {})]
    variants += [
        ("+ speaker label", dict(text_mode="speaker")),
        ("+ [date] speaker label (Event::render)", dict(text_mode="render")),
        ("stop words: Lucene 33", dict(stop_name="lucene")),
        ("stop words: none", dict(stop_name="none")),
        ("IDF: Lucene ln(1+x)", dict(idf="lucene")),
        ("k1 = 1.2", dict(k1=1.2)),
        ("tantivy defaults (render, Lucene stop, Lucene IDF, k1 1.2)",
         dict(text_mode="render", stop_name="lucene", idf="lucene", k1=1.2)),
        ("render + Lucene stop", dict(text_mode="render", stop_name="lucene")),
        ("turn text + sklearn stop + Lucene IDF + k1 1.2", dict(idf="lucene", k1=1.2)),
    ]
    print(f"{'variant':64} " + " ".join(f"{p.split('/')[-1][:22]:>24}" for p, _ in sets))
    for name, change in variants:
        cfg = {**baseline, **change}
        cells = []
        for _, convs in sets:
            r, n = recall_at_k(convs, k=args.k, skip_categories=set(args.skip_category), **cfg)
            cells.append(f"{r:.3f} (n={n})")
        print(f"{name:64} " + " ".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
