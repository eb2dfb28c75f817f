"""Shared fixtures: a small conversation with known answers."""

import pytest

import submem

FACTS = [
    ("D1:1", "Ana", "I adopted a grey cat called Pepper last spring."),
    ("D1:2", "Ben", "Nice! I started learning the cello in March."),
    ("D1:3", "Ana", "My sister Carla moved to Lisbon for a job at the aquarium."),
    ("D2:1", "Ben", "I ran the Porto half marathon in one hour forty-two minutes."),
    ("D2:2", "Ana", "I finally repaired the blue bicycle my grandfather gave me."),
    ("D2:3", "Ben", "We booked a week of hiking in the Azores for September."),
]


def conversation():
    """The facts as turn dicts (two sessions, dated)."""
    return [
        {
            "session_id": sid.split(":")[0],
            "session_date": "2023-05-0" + sid[1],
            "speaker": speaker,
            "text": text,
            "source_id": sid,
        }
        for sid, speaker, text in FACTS
    ]


@pytest.fixture
def turns():
    return conversation()


@pytest.fixture
def m2(turns):
    memory = submem.Memory("m2-fill", memory_llm="none")
    memory.write(turns)
    return memory
