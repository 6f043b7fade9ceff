// Package history records what chaos tests did and checks snowkey's two
// promises from the record:
//
//   - ID files: processes append their IDs (AppendID), and
//     CheckUniqueFiles reports every ID issued twice and by whom;
//   - a History of token operations (Issue, Validate, Revoke,
//     RevokeSession, RevokeAll, Rotate), each with when it began and
//     ended, checked by CheckTokens against the revocation rule.
package history
