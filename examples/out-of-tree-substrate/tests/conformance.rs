//! The substrate keeps the contract every built-in one keeps, and its
//! settings are checked.

use submem_core::Substrate;
use submem_example_plugin::factory;

#[tokio::test]
async fn keyword_echo_passes_the_conformance_suite() {
    submem_core::testing::factory_conformance(&factory(), &[]).await;
}

#[tokio::test]
async fn shows_the_events_sharing_the_most_words_newest_first_on_ties() -> submem_core::Result<()> {
    use submem_core::plugin::BuildContext;
    use submem_core::test_utils::test_services;
    use submem_core::{Event, Namespace, Query, Turn};
    let turn = |id: &str, text: &str| {
        Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: text.into(),
            source_id: id.into(),
        })
    };
    let settings = factory().settings_from_strs(&[("min_shared", "1")])?;
    let echo = factory().build(&BuildContext::new(test_services(None)), &settings)?;
    let ns = Namespace::new("ana")?;
    let history = [
        turn("t1", "I drive a red Fiat"),
        turn("t2", "the weather is nice"),
        turn("t3", "my Fiat is red and old"),
        turn("t4", "a red kite"),
    ];
    echo.write(&ns, &history).await?;
    let recall = echo
        .read(&Query::question(ns, "What colour is Ana's Fiat? red?", 4096).with_top_k(2))
        .await?;
    // t1 and t3 share two words (fiat, red), t4 one: t3 first, the newer
    // of the two; the text shows them in time order.
    assert_eq!(recall.source_ids().collect::<Vec<_>>(), ["t3", "t1"]);
    assert_eq!(
        recall.text,
        "Ana: I drive a red Fiat\nAna: my Fiat is red and old"
    );
    Ok(())
}

#[test]
fn refuses_min_shared_zero_and_unknown_keys() {
    assert!(factory()
        .settings_from_strs(&[("min_shared", "0")])
        .is_err());
    let err = factory()
        .settings_from_strs(&[("min_share", "2")])
        .unwrap_err();
    assert!(err.to_string().contains("min_shared"), "{err}");
}
