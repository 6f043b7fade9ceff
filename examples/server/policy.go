package main

import (
	"slices"
	"strings"
	"unicode"

	"github.com/ccojocar/zxcvbn-go"
	"github.com/ccojocar/zxcvbn-go/match"
	"github.com/ccojocar/zxcvbn-go/matching"
	"github.com/ccojocar/zxcvbn-go/scoring"
)

// The password policy follows NIST SP 800-63B: a minimum length, no
// composition rules, and a check against passwords attackers try first.
// That check is zxcvbn (github.com/ccojocar/zxcvbn-go, the maintained Go
// port): it matches dictionaries of common passwords, names and words,
// keyboard patterns, dates, repeats, sequences and l33t substitutions, and
// the account's own email and name, and estimates how many guesses the
// password would take.
//
// Anyone can make the server run the check, so its cost is bounded by
// what it is given, whatever that is:
//
//   - The port's own l33t matcher tries every combination of the
//     substitutions it finds, which grows exponentially with the distinct
//     l33t characters in the password: the 20 it knows, in 64 characters,
//     cost seconds of CPU, dozens of password hashes (see
//     BenchmarkPasswordPolicy and server.ratios). It is left out, and the
//     policy reads l33t itself: every l33t character
//     stands for its letter, and the three that stand for two letters
//     ('1' and '|' for i or l, '7' for l or t) are tried both ways, so a
//     password is judged in at most 2^3 readings, and without the
//     keyboard-pattern matcher, which a substitution does not help.
//   - Only the first policyRunes characters are judged: the port's
//     matching costs more than linear time in the length.
//
// The costliest password found for the bounded check costs under half a
// password hash, and the check runs in the hash pool's slot, with the
// hash it comes with, so that the pool bounds both.

// minPasswordScore is the zxcvbn score (0 to 4) a new password needs: 3 is
// "safely unguessable", enough against an attacker who stole the hashes
// and guesses offline at argon2id's cost.
const minPasswordScore = 3

// policyRunes is how much of a password the strength check judges. A long
// password is judged by its first 32 characters, which are a strong
// password by themselves unless they are a pattern; its cost grows with
// the square of this length.
const policyRunes = 32

// leetLetters maps each l33t character zxcvbn knows to the letters it can
// stand for.
var leetLetters = map[rune]string{
	'4': "a", '@': "a", '8': "b", '(': "c", '{': "c", '[': "c", '<': "c", '3': "e", '6': "g", '9': "g",
	'!': "i", '1': "il", '|': "il", '7': "lt", '0': "o", '$': "s", '5': "s", '+': "t", '%': "x", '2': "z",
}

// noLeetMatcher leaves out the port's own l33t matcher.
func noLeetMatcher(m match.Matcher) bool { return m.ID == matching.L33TMatcherName }

// leetReadingMatchers leaves out, for the l33t readings, the l33t matcher
// and the keyboard patterns, whose matches a substitution does not make.
func leetReadingMatchers(m match.Matcher) bool {
	return noLeetMatcher(m) || matching.FilterSpatialMatcher(m)
}

// checkPasswordPolicy refuses a new password that is too easy to guess,
// or made of the account's email or name, with a message that says why.
func checkPasswordPolicy(password, email, name string) *apiError {
	local, domain, _ := strings.Cut(email, "@")
	lower := strings.ToLower(password)
	for _, s := range []string{email, local, strings.ToLower(name)} {
		if len(s) >= 3 && strings.Contains(lower, s) {
			return badRequest("password must not contain your email address or name")
		}
	}
	inputs := []string{email, local, domain, name, "snowkey", "example"}
	inputs = append(inputs, strings.FieldsFunc(domain+" "+local+" "+name, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})...)
	res := strength(password, inputs)
	if res.Score < minPasswordScore {
		return badRequest("password is too easy to guess (it would be cracked in %s; strength %d of 4, %d needed): "+
			"use a longer passphrase of unrelated words", res.CrackTimeDisplay, res.Score, minPasswordScore)
	}
	return nil
}

// strength judges a password with zxcvbn, within the bound of the
// package comment: its first policyRunes characters (its repeated unit, if
// it repeats one), and each of its l33t readings; the lowest score wins.
func strength(password string, inputs []string) scoring.MinEntropyMatch {
	judged, readings := policyInputs(password)
	res := zxcvbn.PasswordStrength(string(judged), inputs, noLeetMatcher)
	for _, reading := range readings {
		if r := zxcvbn.PasswordStrength(string(reading), inputs, leetReadingMatchers); r.Score < res.Score {
			res = r
		}
	}
	return res
}

// policyInputs returns what the strength check gives zxcvbn for a
// password: the part it judges, at most policyRunes characters, and its
// l33t readings, at most 8 of them, each as long.
func policyInputs(password string) (judged []rune, readings [][]rune) {
	runes := []rune(password)
	if len(runes) > policyRunes {
		runes = runes[:policyRunes]
	}
	judged = repeatUnit(runes)
	return judged, leetReadings(judged)
}

// leetReadings returns s with every l33t character replaced by a letter
// it stands for, once for each choice of letters of the ambiguous ones (at
// most 8 readings), or nil if s has no l33t character.
func leetReadings(s []rune) [][]rune {
	var ambiguous []rune
	found := false
	for _, r := range s {
		letters, ok := leetLetters[r]
		if !ok {
			continue
		}
		found = true
		if len(letters) > 1 && !slices.Contains(ambiguous, r) {
			ambiguous = append(ambiguous, r)
		}
	}
	if !found {
		return nil
	}
	out := make([][]rune, 0, 1<<len(ambiguous))
	for choice := range 1 << len(ambiguous) {
		reading := make([]rune, len(s))
		for i, r := range s {
			letters, ok := leetLetters[r]
			if !ok {
				reading[i] = r
				continue
			}
			k := 0
			if j := slices.Index(ambiguous, r); j >= 0 {
				k = choice >> j & 1
			}
			reading[i] = rune(letters[k])
		}
		out = append(out, reading)
	}
	return out
}

// repeatUnit returns the shortest unit that s repeats (with a partial
// repeat at the end), or s. The Go port of zxcvbn finds repeats of one
// character only, so "abab…" would score as random: a password is judged
// by its unit instead, since repeating a unit adds almost nothing to guess.
func repeatUnit(s []rune) []rune {
next:
	for p := 1; p <= len(s)/2; p++ {
		for i := p; i < len(s); i++ {
			if s[i] != s[i-p] {
				continue next
			}
		}
		return s[:p]
	}
	return s
}
