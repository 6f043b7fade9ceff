package main

import (
	"strings"
	"unicode"

	"github.com/ccojocar/zxcvbn-go"
)

// The password policy follows NIST SP 800-63B: a minimum length, no
// composition rules, and a check against passwords attackers try first.
// That check is zxcvbn (github.com/ccojocar/zxcvbn-go, the maintained Go
// port): it matches dictionaries of common passwords, names and words,
// keyboard patterns, dates, repeats, sequences and l33t substitutions, and
// the account's own email and name, and estimates how many guesses the
// password would take.

// minPasswordScore is the zxcvbn score (0 to 4) a new password needs: 3 is
// "safely unguessable", enough against an attacker who stole the hashes
// and guesses offline at argon2id's cost.
const minPasswordScore = 3

// policyRunes is how much of a password zxcvbn scores. Its matching costs
// far more than linear time (a 1,024-character password takes seconds), so
// a long password is judged by its first 64 characters, which are a strong
// password by themselves unless they are a pattern.
const policyRunes = 64

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
	runes := []rune(password)
	if len(runes) > policyRunes {
		runes = runes[:policyRunes]
	}
	res := zxcvbn.PasswordStrength(string(repeatUnit(runes)), inputs)
	if res.Score < minPasswordScore {
		return badRequest("password is too easy to guess (it would be cracked in %s; strength %d of 4, %d needed): "+
			"use a longer passphrase of unrelated words", res.CrackTimeDisplay, res.Score, minPasswordScore)
	}
	return nil
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
