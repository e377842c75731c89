//! Statistics behind kymo's verdicts (being written).
