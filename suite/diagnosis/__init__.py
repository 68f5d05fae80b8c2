"""Failure diagnosis: where the wrong elements of a failing output sit, how the failures
of an implementation depend on case features across a run, and a one-line likely cause.

Generic machinery only. An op says what its axes and features mean through
`OpSpec.diagnosis`, a `DiagnosisSpec`: named regions of each output (tile ends, packed
boundaries, padding, one batch index, ...), reference terms its error can be compared with
(e.g. the contribution of the gradients right of each tile), the case features that
matter, its causes and a rule table from evidence to causes. This package measures and
scores; it knows no op. One module a job:

    the vocabulary ops fill in
        vocabulary.py     DiagnosisSpec and its parts: Region, Term, Feature, CauseSpec
        evidence.py       Evidence (what a rule reads), Rule, candidates, the thresholds
        generic.py        the causes and rules any op may list (Generic, GENERIC_RULES)
        axis_pattern.py   AxisPattern, the period search's record and its words
        hypotheses.py     Hypotheses: the golden's named terms and perturbations, each a
                          story fitted to the error (term x c, a perturbed attribute, a
                          shifted or transposed index); the one that explains it names
                          the cause, else the closest ones are said
    per failing item (`diagnose_item`, called by the runner)
        measurements.py   wrong elements, Location per region, TermFit per term
        period_search.py  the pattern along each axis: one index, a prefix, every tile
                          but the first, the remainder past the last multiple of P,
                          residues of any period P
        localisation.py   -> Evidence -> the op's rules -> candidates -> one line
    across a run (`diagnose_run`, for the mutants command and the report)
        attribution.py    per implementation, the cause that best explains which items
                          fail (naive Bayes over items and features), or "unclassified"

The names below are those the rest of the repository imports from this path.
"""

from bwd_suite.suite.diagnosis.attribution import (EffectKind, RunDiagnosis, diagnose_run,
                                                   feature_effects, score_causes, supported)
from bwd_suite.suite.diagnosis.axis_pattern import AxisPattern, remainder_periods
from bwd_suite.suite.diagnosis.evidence import (COEF_TOL, EXACT_RESIDUAL, PARTIAL_RESIDUAL,
                                                Evidence, Rule, candidates)
from bwd_suite.suite.diagnosis.generic import GENERIC_RULES, Generic, along_axis, fallback, \
    generic_causes, precision_rule
from bwd_suite.suite.diagnosis.hypotheses import MIN_SCALED, Hypotheses, IndexCause, ordered
from bwd_suite.suite.diagnosis.localisation import diagnose_item
from bwd_suite.suite.diagnosis.measurements import Location, TermFit, fit_term, locate
from bwd_suite.suite.diagnosis.period_search import axis_patterns
from bwd_suite.suite.diagnosis.vocabulary import (CauseSpec, DiagnosisSpec, Feature, Region,
                                                  Term)

__all__ = [
    # the vocabulary (ops/*_diagnosis.py)
    "DiagnosisSpec", "CauseSpec", "Feature", "Region", "Term", "Rule", "Evidence",
    "COEF_TOL", "EXACT_RESIDUAL", "PARTIAL_RESIDUAL",
    "Generic", "GENERIC_RULES", "generic_causes", "fallback", "along_axis", "precision_rule",
    "Hypotheses", "IndexCause", "ordered", "MIN_SCALED",
    # per item (suite/runner.py) and its measurements (tests)
    "diagnose_item", "Location", "TermFit", "locate", "fit_term", "AxisPattern",
    "axis_patterns", "remainder_periods", "candidates",
    # across a run (suite/summary.py, suite/commands/mutants.py, tests)
    "diagnose_run", "RunDiagnosis", "EffectKind", "feature_effects", "score_causes",
    "supported",
]
