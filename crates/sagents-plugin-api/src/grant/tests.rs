use super::*;
use chrono::Duration;

const SECRET: &[u8] = b"shared-secret";
const AUD: &str = "provider-a";

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
}

#[test]
fn a_fresh_grant_verifies() {
    let t = now();
    let g = mint(SECRET, AUD, "sbx_1", 3, t + Duration::seconds(60));
    assert_eq!(g.generation, 3);
    assert_eq!(g.expires_at, t + Duration::seconds(60));
    let claims = verify(SECRET, &g.token, AUD, "sbx_1", 3, t).unwrap();
    assert_eq!(claims.sandbox_id, "sbx_1");
    assert_eq!(claims.audience.as_deref(), Some(AUD));
}

#[test]
fn tampering_is_detected() {
    let t = now();
    let g = mint(SECRET, AUD, "sbx_1", 1, t + Duration::seconds(60));
    let forged = mint(b"other-secret", AUD, "sbx_1", 1, t + Duration::seconds(60));
    assert_eq!(
        verify(SECRET, &forged.token, AUD, "sbx_1", 1, t),
        Err(GrantError::BadSignature)
    );
    // Swap in claims for another generation, keep the old signature.
    let other = mint(SECRET, AUD, "sbx_1", 2, t + Duration::seconds(60));
    let (_, old_tag) = g.token.rsplit_once('.').unwrap();
    let (other_signed, _) = other.token.rsplit_once('.').unwrap();
    let spliced = format!("{other_signed}.{old_tag}");
    assert_eq!(
        verify(SECRET, &spliced, AUD, "sbx_1", 2, t),
        Err(GrantError::BadSignature)
    );
    for junk in ["", "sgr1", "sgr1.a.b", "xyz.abc.def", "sgr1.!!.??"] {
        assert!(verify(SECRET, junk, AUD, "sbx_1", 1, t).is_err(), "{junk}");
    }
}

#[test]
fn expired_grants_are_refused() {
    let t = now();
    let g = mint(SECRET, AUD, "sbx_1", 1, t + Duration::seconds(5));
    assert!(verify(SECRET, &g.token, AUD, "sbx_1", 1, t + Duration::seconds(4)).is_ok());
    assert!(matches!(
        verify(SECRET, &g.token, AUD, "sbx_1", 1, t + Duration::seconds(5)),
        Err(GrantError::Expired(_))
    ));
}

#[test]
fn a_grant_names_one_sandbox_and_one_generation() {
    let t = now();
    let g = mint(SECRET, AUD, "sbx_1", 1, t + Duration::seconds(60));
    assert!(matches!(
        verify(SECRET, &g.token, AUD, "sbx_2", 1, t),
        Err(GrantError::WrongSandbox { .. })
    ));
    assert_eq!(
        verify(SECRET, &g.token, AUD, "sbx_1", 2, t),
        Err(GrantError::WrongGeneration {
            granted: 1,
            current: 2
        })
    );
}

fn ed_signer(fill: u8) -> GrantSigner {
    GrantSigner::ed25519(&[fill; 32])
}

#[test]
fn an_ed25519_grant_verifies_with_the_public_key_alone() {
    let t = now();
    let signer = ed_signer(7);
    let public = signer.verifier().public_key_text().unwrap();
    assert!(public.starts_with("ed25519-pub:"));
    let verifier = GrantVerifier::from_public_key_text(&format!(" {public}\n")).unwrap();
    let g = signer.mint(AUD, "sbx_1", 3, t + Duration::seconds(60));
    assert!(g.token.starts_with("sgr2."));
    let claims = verifier.verify(&g.token, AUD, "sbx_1", 3, t).unwrap();
    assert_eq!(
        (claims.sandbox_id.as_str(), claims.generation),
        ("sbx_1", 3)
    );
    assert!(matches!(
        verifier.verify(&g.token, AUD, "sbx_1", 3, t + Duration::seconds(60)),
        Err(GrantError::Expired(_))
    ));
    assert!(matches!(
        verifier.verify(&g.token, AUD, "sbx_2", 3, t),
        Err(GrantError::WrongSandbox { .. })
    ));
    assert!(matches!(
        verifier.verify(&g.token, AUD, "sbx_1", 4, t),
        Err(GrantError::WrongGeneration { .. })
    ));
}

#[test]
fn a_grant_signed_by_another_key_is_refused() {
    let t = now();
    let verifier = ed_signer(1).verifier();
    let forged = ed_signer(2).mint(AUD, "sbx_1", 1, t + Duration::seconds(60));
    assert_eq!(
        verifier.verify(&forged.token, AUD, "sbx_1", 1, t),
        Err(GrantError::BadSignature)
    );
    // Claims swapped under a genuine signature.
    let genuine = ed_signer(1).mint(AUD, "sbx_1", 1, t + Duration::seconds(60));
    let other = ed_signer(2).mint(AUD, "sbx_1", 2, t + Duration::seconds(600));
    let (_, sig) = genuine.token.rsplit_once('.').unwrap();
    let (other_signed, _) = other.token.rsplit_once('.').unwrap();
    assert_eq!(
        verifier.verify(&format!("{other_signed}.{sig}"), AUD, "sbx_1", 2, t),
        Err(GrantError::BadSignature)
    );
    for junk in ["sgr2", "sgr2.a.b", "sgr2.!!.??", "sgr2.e30.AAAA"] {
        assert!(verifier.verify(junk, AUD, "sbx_1", 1, t).is_err(), "{junk}");
    }
}

#[test]
fn the_kinds_do_not_mix() {
    let t = now();
    let hmac = mint(SECRET, AUD, "sbx_1", 1, t + Duration::seconds(60));
    assert_eq!(
        ed_signer(1)
            .verifier()
            .verify(&hmac.token, AUD, "sbx_1", 1, t),
        Err(GrantError::WrongKind {
            got: "sgr1",
            want: "sgr2"
        })
    );
    let ed = ed_signer(1).mint(AUD, "sbx_1", 1, t + Duration::seconds(60));
    assert!(matches!(
        verify(SECRET, &ed.token, AUD, "sbx_1", 1, t),
        Err(GrantError::WrongKind { .. })
    ));
    assert!(looks_like_grant(&ed.token) && looks_like_grant(&hmac.token));
    assert!(!looks_like_grant("provider-service-token"));
}

#[test]
fn a_public_key_verifier_cannot_mint() {
    let verifier = ed_signer(1).verifier();
    assert!(verifier.signer().is_none());
    assert!(GrantVerifier::hmac(SECRET).signer().is_some());
}

#[test]
fn key_texts_round_trip_and_are_not_confused() {
    let signer = ed_signer(9);
    let private = signer.private_key_text().unwrap();
    let again = GrantSigner::from_private_key_text(&private).unwrap();
    assert_eq!(
        again.verifier().public_key_text(),
        signer.verifier().public_key_text()
    );
    let public = signer.verifier().public_key_text().unwrap();
    assert_eq!(
        GrantVerifier::from_public_key_text(&private).unwrap_err(),
        KeyError::PrivateGivenForPublic
    );
    assert_eq!(
        GrantSigner::from_private_key_text(&public).unwrap_err(),
        KeyError::PublicGivenForPrivate
    );
    for bad in ["", "ed25519-pub:", "ed25519-pub:AAAA", "ssh-ed25519 AAAA"] {
        assert!(GrantVerifier::from_public_key_text(bad).is_err(), "{bad}");
    }
    assert!(GrantSigner::hmac(SECRET).private_key_text().is_none());
    assert!(!format!("{signer:?}").contains(&private));
}

#[test]
fn a_grant_opens_only_the_provider_it_names() {
    let t = now();
    let g = mint(SECRET, "provider-a", "sbx_1", 1, t + Duration::seconds(60));
    assert!(verify(SECRET, &g.token, "provider-a", "sbx_1", 1, t).is_ok());
    assert_eq!(
        verify(SECRET, &g.token, "provider-b", "sbx_1", 1, t),
        Err(GrantError::WrongAudience {
            granted: "provider-a".into(),
            this: "provider-b".into()
        })
    );
    let ed = ed_signer(1).mint("provider-a", "sbx_1", 1, t + Duration::seconds(60));
    assert!(matches!(
        ed_signer(1)
            .verifier()
            .verify(&ed.token, "provider-b", "sbx_1", 1, t),
        Err(GrantError::WrongAudience { .. })
    ));
}

/// A grant as minted before audiences: the same claims without one, correctly signed.
fn without_audience(secret: &[u8], claims: &str) -> String {
    let signed = format!("sgr1.{}", B64.encode(claims));
    let tag = B64.encode(mac(secret, signed.as_bytes()).finalize().into_bytes());
    format!("{signed}.{tag}")
}

#[test]
fn a_grant_without_an_audience_is_refused() {
    let t = now();
    let expires = (t + Duration::seconds(60)).timestamp_millis();
    let old = without_audience(
        SECRET,
        &format!(r#"{{"sandbox_id":"sbx_1","generation":1,"expires_at_ms":{expires}}}"#),
    );
    assert_eq!(
        verify(SECRET, &old, AUD, "sbx_1", 1, t),
        Err(GrantError::NoAudience)
    );
    let empty = without_audience(
        SECRET,
        &format!(
            r#"{{"audience":"","sandbox_id":"sbx_1","generation":1,"expires_at_ms":{expires}}}"#
        ),
    );
    assert!(matches!(
        verify(SECRET, &empty, AUD, "sbx_1", 1, t),
        Err(GrantError::WrongAudience { .. })
    ));
}
